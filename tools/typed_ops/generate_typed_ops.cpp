// Writes the typed C function of every registry op: the declarations
// (samba/ops_generated.h) and their implementation (a C++ file compiled into
// libsamba). The registry is the one declaration of each op, as PyTorch's
// native_functions.yaml is; this program only reads it.
//
//   generate_typed_ops OUT_HEADER OUT_SOURCE HAND_WRITTEN_HEADER...
//
// A function the hand-written headers already declare is never generated
// again: an op without attributes keeps its hand-written function (it has
// the generated signature), an op with attributes gets every attribute
// under the name samba_<op>_v2, the ABI's name for a longer signature.
#include <fmt/format.h>

#include <cctype>
#include <fstream>
#include <iostream>
#include <iterator>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "engine/ops/registry.h"

using samba::AttrSpec;
using samba::AttrType;
using samba::OpDef;

namespace {

struct Param {
  std::string decl;  // "const int64_t* stride, size_t n_stride"
  std::string name;  // "stride"
};

// Parameter names: the schema's, unless C or C++ reserves them or an earlier
// parameter (or the function's own locals) took them.
class Names {
 public:
  std::string take(std::string name) {
    static const std::set<std::string> reserved = {
        "auto",   "break",    "case",     "char",    "const",     "continue", "default",
        "do",     "double",   "else",     "enum",    "extern",    "float",    "for",
        "goto",   "if",       "inline",   "int",     "long",      "register", "restrict",
        "return", "short",    "signed",   "sizeof",  "static",    "struct",   "switch",
        "typedef", "union",   "unsigned", "void",    "volatile",  "while",    "bool",
        "true",   "false",    "new",      "delete",  "class",     "template", "this",
        "operator", "private", "public",  "protected", "namespace", "using",  "try",
        "catch",  "throw",    "export",   "mutable", "explicit",  "typename", "call_",
        "outs_"};
    while (reserved.count(name) || used_.count(name)) name += '_';
    used_.insert(name);
    return name;
  }

 bool taken(const std::string& name) const { return used_.count(name) != 0; }

 private:
  std::set<std::string> used_{"session"};
};

bool required(const AttrSpec& a) {
  return std::holds_alternative<std::monostate>(a.default_value) && !a.optional;
}

std::string c_comment_text(std::string s) {
  for (size_t p; (p = s.find("*/")) != std::string::npos;) s.replace(p, 2, "* /");
  return s;
}

// Word-wraps `text` after `first` into comment lines starting with `indent`.
void wrap(std::ostream& o, const std::string& first, const std::string& text,
          const std::string& indent, const std::string& end = "") {
  std::istringstream words(c_comment_text(text));
  std::string line = first, w;
  while (words >> w) {
    if (line.size() + 1 + w.size() > 80 && line.size() > indent.size()) {
      o << line << "\n";
      line = indent;
    }
    line += " " + w;
  }
  o << line << end << "\n";
}

std::string default_text(const AttrSpec& a) {
  if (a.optional) return "optional, NULL: not given";
  if (required(a)) return "required";
  std::string v = samba::attr_value_str(a.default_value);
  switch (a.type) {
    case AttrType::Ints:
    case AttrType::Floats:
    case AttrType::String: return "default " + v + ", NULL: the default";
    default: return "default " + v;
  }
}

// How a scalar attribute crosses the C boundary: its C type and the
// TypedOpCall method that takes it, given by value, or as a pointer when
// the attribute is optional (NULL: not given).
struct ScalarForm {
  const char* type;
  const char* method;
  const char* optional_type;
  const char* optional_method;
};

const ScalarForm* scalar_form(AttrType t) {
  static const ScalarForm kInt{"int64_t", "attr", "const int64_t*", "optional"};
  static const ScalarForm kFloat{"double", "attr", "const double*", "optional"};
  static const ScalarForm kBool{"int32_t", "flag", "const int32_t*", "optional_flag"};
  static const ScalarForm kDType{"samba_dtype", "dtype", "const samba_dtype*", "optional_dtype"};
  switch (t) {
    case AttrType::Int: return &kInt;
    case AttrType::Float: return &kFloat;
    case AttrType::Bool: return &kBool;
    case AttrType::DType: return &kDType;
    default: return nullptr;
  }
}

struct Function {
  std::string op;
  std::string name;
  std::vector<Param> params;
  std::vector<std::string> body;  // statements on `call_`
  std::vector<std::string> outs;  // out-parameter names (fixed outputs)
  bool variadic_outputs = false;
  std::string doc;
};

Function describe(const OpDef& op, const std::string& name) {
  Function f;
  f.op = op.name;
  f.name = name;
  Names names;
  std::ostringstream doc;
  wrap(doc, "/* " + op.name + ":", op.doc, " *");
  for (const auto& in : op.inputs) {
    std::string n = names.take(in.name);
    std::string what = in.doc;
    if (in.variadic) {
      f.params.push_back({fmt::format("samba_tensor* const* {0}, size_t n_{0}", n), n});
      f.body.push_back(fmt::format("variadic_input(\"{}\", {}, n_{})", in.name, n, n));
      what += " (an array of n_" + n + " tensors)";
    } else {
      f.params.push_back({"samba_tensor* " + n, n});
      if (in.optional) {
        f.body.push_back(fmt::format("optional_input({})", n));
        what += " May be NULL.";
      } else {
        f.body.push_back(fmt::format("input(\"{}\", {})", in.name, n));
      }
    }
    if (in.mutated) what += " Updated in place.";
    wrap(doc, " *   " + n + ":", what, " *     ");
  }
  for (const auto& a : op.attrs) {
    std::string n = names.take(a.name);
    const bool req = required(a);
    if (const ScalarForm* form = scalar_form(a.type)) {
      const char* type = a.optional ? form->optional_type : form->type;
      f.params.push_back({fmt::format("{} {}", type, n), n});
      f.body.push_back(fmt::format("{}(\"{}\", {})",
                                   a.optional ? form->optional_method : form->method, a.name, n));
    } else if (a.type == AttrType::String) {
      f.params.push_back({"const char* " + n, n});
      f.body.push_back(fmt::format("string(\"{}\", {}, {})", a.name, n, req));
    } else {
      const bool ints = a.type == AttrType::Ints;
      f.params.push_back(
          {fmt::format("const {}* {}, size_t n_{}", ints ? "int64_t" : "double", n, n), n});
      f.body.push_back(
          fmt::format("{}(\"{}\", {}, n_{}, {})", ints ? "ints" : "floats", a.name, n, n, req));
    }
    // The schema's range is what every path (this call, run, set_argin)
    // refuses outside of, so the header states it.
    wrap(doc,
         fmt::format(" *   {} ({}, {}{}):", n, samba::attr_type_name(a.type), default_text(a),
                     a.range ? ", " + a.range->str() : std::string()),
         a.doc, " *     ");
  }
  if (op.outputs.size() == 1 && op.outputs[0].variadic) {
    f.variadic_outputs = true;
    f.params.push_back(
        {"samba_tensor** outputs, size_t capacity, size_t* n_outputs", "outputs"});
    wrap(doc, " *   outputs:",
         op.outputs[0].doc + " OWNED tensors written to outputs[0..*n_outputs); capacity is "
                             "the length of outputs (OUT_OF_RANGE when too small: *n_outputs "
                             "says how many are needed).",
         " *     ");
  } else {
    for (const auto& o : op.outputs) {
      // One output is `out` (`result` when an input has that name).
      std::string n = names.take(op.outputs.size() > 1 ? "out_" + o.name
                                 : names.taken("out") ? "result"
                                                      : "out");
      f.params.push_back({"samba_tensor** " + n, n});
      f.outs.push_back(n);
      wrap(doc, " *   " + n + ":", "OWNED result, NULL after a failure. " + o.doc, " *     ");
    }
  }
  doc << " * Errors: as samba_op_call: NULL_POINTER (a required tensor or an\n"
         " * out-parameter), INVALID_ARGUMENT, SHAPE_MISMATCH, DTYPE_MISMATCH,\n"
         " * OUT_OF_RANGE, and the op's own. */\n";
  f.doc = doc.str();
  return f;
}

// One line when it fits in 100 columns, else one parameter per line.
std::string signature(const Function& f) {
  std::string one = "samba_status " + f.name + "(samba_session* session";
  std::string many = one;
  for (const auto& p : f.params) {
    one += ", " + p.decl;
    many += ",\n    " + p.decl;
  }
  return one.size() + 12 <= 100 ? one + ")" : many + ")";
}

std::set<std::string> declared_names(const std::vector<std::string>& headers) {
  std::set<std::string> names;
  for (const auto& path : headers) {
    std::ifstream in(path);
    if (!in) throw std::runtime_error("cannot read " + path);
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    for (size_t p = 0; (p = text.find("samba_", p)) != std::string::npos;) {
      size_t e = p;
      auto identifier = [](char c) {
        return std::isalnum(static_cast<unsigned char>(c)) || c == '_';
      };
      while (e < text.size() && identifier(text[e])) ++e;
      if (e < text.size() && text[e] == '(') names.insert(text.substr(p, e - p));
      p = e;
    }
  }
  return names;
}

}  // namespace

int main(int argc, char** argv) try {
  if (argc < 3) {
    std::cerr << "usage: generate_typed_ops OUT_HEADER OUT_SOURCE HAND_WRITTEN_HEADER...\n";
    return 2;
  }
  const std::set<std::string> hand_written =
      declared_names(std::vector<std::string>(argv + 3, argv + argc));
  std::vector<Function> functions;
  std::vector<std::string> kept;
  for (const OpDef* op : samba::OpRegistry::global().all()) {
    std::string name = "samba_" + op->name;
    if (hand_written.count(name)) {
      if (op->attrs.empty()) {
        kept.push_back(name);
        continue;
      }
      name += "_v2";
    }
    functions.push_back(describe(*op, name));
  }

  std::ofstream h(argv[1]);
  h << "/* samba/ops_generated.h: one typed C function per registry op.\n"
       " * GENERATED at build time from the op registry by tools/typed_ops: do not edit.\n"
       " * Each function is samba_op_call of its op: the session gives the thread pool\n"
       " * (NULL: the default pool); inputs, then attributes in schema order, then one\n"
       " * out-parameter per output. A list attribute is a pointer and a count, a\n"
       " * string a const char*, an optional scalar a pointer (NULL: not given).\n"
       " * Included by <samba.h>; part of the C interface and its conventions. */\n"
       "#ifndef SAMBA_OPS_GENERATED_H\n#define SAMBA_OPS_GENERATED_H\n\n"
       "#include \"samba/tensor.h\"\n\n"
       "#ifdef __cplusplus\nextern \"C\" {\n#endif\n\n";
  std::string kept_list;
  for (const auto& k : kept) kept_list += (kept_list.empty() ? "" : ", ") + k;
  wrap(h, "/* Ops whose typed function is the hand-written one of samba/ops.h:",
       kept_list + ".", " *", " */");
  h << "\n";
  for (const auto& f : functions) h << f.doc << "SAMBA_API " << signature(f) << ";\n\n";
  h << "#ifdef __cplusplus\n} /* extern \"C\" */\n#endif\n\n#endif /* SAMBA_OPS_GENERATED_H */\n";

  std::ofstream cpp(argv[2]);
  cpp << "// GENERATED at build time from the op registry by tools/typed_ops: do not edit.\n"
         "#include \"bindings/c/capi_typed_call.h\"\n"
         "#include \"samba/ops_generated.h\"\n\n"
         "using samba::capi::TypedOpCall;\n\nextern \"C\" {\n\n";
  for (const auto& f : functions) {
    cpp << signature(f) << " {\n";
    const std::string& op = f.op;
    std::string body;
    for (const auto& s : f.body) body += "    call_." + s + ";\n";
    const std::string lambda = "[&](TypedOpCall& call_) {\n" + body + "  }";
    if (f.variadic_outputs) {
      cpp << fmt::format(
          "  return samba::capi::call_typed_op_variadic(__func__, session, \"{}\", outputs, "
          "capacity, n_outputs, {});\n",
          op, lambda);
    } else {
      std::string outs;
      for (const auto& o : f.outs) outs += (outs.empty() ? "" : ", ") + o;
      if (f.outs.empty())
        cpp << "  return samba::capi::call_typed_op(__func__, session, \"" << op << "\", {}, "
            << lambda << ");\n";
      else
        cpp << "  samba_tensor** const outs_[] = {" << outs << "};\n"
            << "  return samba::capi::call_typed_op(__func__, session, \"" << op
            << "\", outs_, " << lambda << ");\n";
    }
    cpp << "}\n\n";
  }
  cpp << "}  // extern \"C\"\n";
  if (!h || !cpp) throw std::runtime_error("cannot write the generated files");
  return 0;
} catch (const std::exception& e) {
  std::cerr << "generate_typed_ops: " << e.what() << "\n";
  return 1;
}
