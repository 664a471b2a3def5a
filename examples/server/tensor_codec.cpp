#include "tensor_codec.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <regex>

namespace samba_server {
namespace {

using nlohmann::json;

// Above this a shape is refused before its product can overflow; the body
// size limit bounds real requests far below it.
constexpr int64_t kMaxElements = int64_t{1} << 40;

int64_t checked_numel(const std::vector<int64_t>& shape, const std::string& what) {
  int64_t n = 1;
  for (int64_t d : shape) {
    if (d < 0) throw BadRequest(400, what + ": shape " + shape_text(shape) + " has a negative dim");
    if (d != 0 && n > kMaxElements / d)
      throw BadRequest(400, what + ": shape " + shape_text(shape) + " has too many elements");
    n *= d;
  }
  return n;
}

template <typename T>
void append_value(std::string& out, T v) {
  char raw[sizeof(T)];
  std::memcpy(raw, &v, sizeof(T));
  out.append(raw, sizeof(T));
}

// One JSON number (or boolean) converted to `dtype`; integers must be exact.
void append_json_value(std::string& out, samba_dtype dtype, const json& v, const std::string& what,
                       size_t i) {
  auto fail = [&](const char* expected) {
    throw BadRequest(
        400, what + ": data[" + std::to_string(i) + "] is " + v.dump() + ", expected " + expected);
  };
  if (dtype == SAMBA_BOOL) {
    if (v.is_boolean()) return append_value<uint8_t>(out, v.get<bool>() ? 1 : 0);
    if (v.is_number_integer() && (v.get<int64_t>() == 0 || v.get<int64_t>() == 1))
      return append_value<uint8_t>(out, static_cast<uint8_t>(v.get<int64_t>()));
    fail("true, false, 0 or 1");
  }
  if (dtype == SAMBA_FLOAT32 || dtype == SAMBA_FLOAT64) {
    if (!v.is_number()) fail("a number");
    const double d = v.get<double>();
    return dtype == SAMBA_FLOAT32 ? append_value(out, static_cast<float>(d)) : append_value(out, d);
  }
  if (!v.is_number_integer()) fail("an integer");
  const bool is_unsigned = v.is_number_unsigned();
  const int64_t x = is_unsigned && v.get<uint64_t>() > uint64_t(std::numeric_limits<int64_t>::max())
                        ? std::numeric_limits<int64_t>::max()
                        : v.get<int64_t>();
  auto in_range = [&](int64_t lo, int64_t hi) {
    if (x < lo || x > hi || (is_unsigned && x == std::numeric_limits<int64_t>::max()))
      fail(("an integer in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]").c_str());
  };
  switch (dtype) {
    case SAMBA_INT64:
      return append_value<int64_t>(out, x);
    case SAMBA_INT32:
      in_range(INT32_MIN, INT32_MAX);
      return append_value(out, static_cast<int32_t>(x));
    case SAMBA_INT16:
      in_range(INT16_MIN, INT16_MAX);
      return append_value(out, static_cast<int16_t>(x));
    case SAMBA_INT8:
      in_range(INT8_MIN, INT8_MAX);
      return append_value(out, static_cast<int8_t>(x));
    case SAMBA_UINT8:
      in_range(0, UINT8_MAX);
      return append_value(out, static_cast<uint8_t>(x));
    default:
      break;
  }
  throw BadRequest(400, what + ": dtype " + samba_dtype_name(dtype) +
                            " cannot be sent as JSON; send a .npy body (application/x-npy)");
}

template <typename T>
T read_value(const char* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}

json json_value(samba_dtype dtype, const char* p) {
  switch (dtype) {
    case SAMBA_FLOAT32:
      return static_cast<double>(read_value<float>(p));
    case SAMBA_FLOAT64:
      return read_value<double>(p);
    case SAMBA_INT64:
      return read_value<int64_t>(p);
    case SAMBA_INT32:
      return read_value<int32_t>(p);
    case SAMBA_INT16:
      return read_value<int16_t>(p);
    case SAMBA_INT8:
      return read_value<int8_t>(p);
    case SAMBA_UINT8:
      return read_value<uint8_t>(p);
    case SAMBA_BOOL:
      return read_value<uint8_t>(p) != 0;
    default:
      return nullptr;
  }
}

// NumPy's descr of each dtype ('<' little-endian, '|' byte-sized).
struct NpyType {
  samba_dtype dtype;
  const char* descr;
};
constexpr NpyType kNpyTypes[] = {
    {SAMBA_FLOAT32, "<f4"}, {SAMBA_FLOAT64, "<f8"}, {SAMBA_FLOAT16, "<f2"},
    {SAMBA_INT64, "<i8"},   {SAMBA_INT32, "<i4"},   {SAMBA_INT16, "<i2"},
    {SAMBA_INT8, "|i1"},    {SAMBA_UINT8, "|u1"},   {SAMBA_BOOL, "|b1"}};

std::string npy_descr_list() {
  std::string s;
  for (const NpyType& t : kNpyTypes) s += (s.empty() ? "'" : ", '") + std::string(t.descr) + "'";
  return s;
}

}  // namespace

int64_t HostTensor::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::string shape_text(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

std::map<std::string, HostTensor> decode_json_inputs(std::string_view body) {
  const json doc = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded())
    throw BadRequest(
        400,
        "the body is not valid JSON; expected {\"inputs\": {\"<name>\": {\"shape\": [...], "
        "\"dtype\": \"float32\", \"data\": [...]}}}");
  if (!doc.is_object() || !doc.contains("inputs") || !doc["inputs"].is_object() ||
      doc["inputs"].empty())
    throw BadRequest(400,
                     "the JSON body has no \"inputs\" object; expected {\"inputs\": {\"<name>\": "
                     "{\"shape\": [...], \"dtype\": \"float32\", \"data\": [...]}}}");
  std::map<std::string, HostTensor> out;
  for (const auto& [name, spec] : doc["inputs"].items()) {
    const std::string what = "input '" + name + "'";
    if (!spec.is_object() || !spec.contains("shape") || !spec.contains("data"))
      throw BadRequest(
          400, what + " is not an object with \"shape\" and \"data\" (and optionally \"dtype\")");
    HostTensor t;
    const json& shape = spec["shape"];
    if (!shape.is_array())
      throw BadRequest(400, what + ": \"shape\" is " + shape.dump() + ", expected a list");
    for (const json& d : shape) {
      if (!d.is_number_integer() || d.get<int64_t>() < 0)
        throw BadRequest(
            400, what + ": \"shape\" holds " + d.dump() + ", expected non-negative integers");
      t.shape.push_back(d.get<int64_t>());
    }
    if (spec.contains("dtype") && !spec["dtype"].is_string())
      throw BadRequest(400, what + ": \"dtype\" is " + spec["dtype"].dump() +
                                ", expected a name such as \"float32\"");
    const std::string dtype_name = spec.value("dtype", std::string("float32"));
    t.dtype = -1;
    for (samba_dtype d = SAMBA_FLOAT32; d <= SAMBA_BOOL; ++d)
      if (dtype_name == samba_dtype_name(d)) t.dtype = d;
    if (t.dtype < 0)
      throw BadRequest(
          400, what + ": unknown dtype '" + dtype_name +
                   "'; expected float32, float64, int64, int32, int16, int8, uint8 or bool");
    const json& data = spec["data"];
    if (!data.is_array())
      throw BadRequest(400, what + ": \"data\" is not a list; expected a flat list of numbers");
    const int64_t numel = checked_numel(t.shape, what);
    if (static_cast<int64_t>(data.size()) != numel)
      throw BadRequest(400, what + ": \"data\" has " + std::to_string(data.size()) +
                                " values, shape " + shape_text(t.shape) + " needs " +
                                std::to_string(numel));
    t.bytes.reserve(static_cast<size_t>(numel) * samba_dtype_size(t.dtype));
    for (size_t i = 0; i < data.size(); ++i) append_json_value(t.bytes, t.dtype, data[i], what, i);
    out.emplace(name, std::move(t));
  }
  return out;
}

HostTensor decode_npy(std::string_view body) {
  static const std::string kMagic("\x93NUMPY", 6);
  if (body.size() < 10 || body.substr(0, 6) != kMagic)
    throw BadRequest(400, "the body is not a .npy file: it does not start with \"\\x93NUMPY\"");
  const auto major = static_cast<uint8_t>(body[6]);
  size_t header_len = 0, header_at = 0;
  if (major == 1) {
    header_len = static_cast<uint8_t>(body[8]) | (size_t(static_cast<uint8_t>(body[9])) << 8);
    header_at = 10;
  } else if (major == 2 || major == 3) {
    if (body.size() < 12) throw BadRequest(400, "the .npy file ends inside its header length");
    for (int i = 3; i >= 0; --i) header_len = (header_len << 8) | static_cast<uint8_t>(body[8 + i]);
    header_at = 12;
  } else {
    throw BadRequest(
        400, "the .npy file has format version " + std::to_string(major) + ", expected 1, 2 or 3");
  }
  // NumPy's headers are a few hundred bytes; the cap also bounds the regex
  // matching below (std::regex recurses per character).
  constexpr size_t kMaxHeader = 4096;
  if (header_len > kMaxHeader)
    throw BadRequest(400, "the .npy header length " + std::to_string(header_len) + " is over " +
                              std::to_string(kMaxHeader) + " bytes");
  if (header_len > body.size() - header_at)
    throw BadRequest(400, "the .npy header length " + std::to_string(header_len) +
                              " runs past the body's " + std::to_string(body.size()) + " bytes");
  const std::string header(body.substr(header_at, header_len));
  // The header is a Python dict literal NumPy writes in one fixed form.
  static const std::regex kDescr(R"('descr'\s*:\s*'([^']*)')");
  static const std::regex kFortran(R"('fortran_order'\s*:\s*(True|False))");
  static const std::regex kShape(R"('shape'\s*:\s*\(([^)]*)\))");
  std::smatch descr, fortran, shape;
  if (!std::regex_search(header, descr, kDescr) || !std::regex_search(header, fortran, kFortran) ||
      !std::regex_search(header, shape, kShape))
    throw BadRequest(400, "the .npy header '" + header.substr(0, 200) +
                              "' lacks 'descr', 'fortran_order' or 'shape'");
  HostTensor t;
  t.dtype = -1;
  for (const NpyType& n : kNpyTypes)
    if (descr[1] == n.descr || (descr[1].str().size() == 3 && descr[1].str()[0] == '=' &&
                                descr[1].str().substr(1) == std::string(n.descr).substr(1)))
      t.dtype = n.dtype;
  if (t.dtype < 0)
    throw BadRequest(400, "the .npy dtype '" + descr[1].str() +
                              "' is not supported; expected one of " + npy_descr_list());
  static const std::regex kDim(R"(\s*(\d{1,18})\s*)");
  std::string dims = shape[1];
  size_t start = 0;
  while (start < dims.size()) {
    const size_t comma = std::min(dims.find(',', start), dims.size());
    const std::string part = dims.substr(start, comma - start);
    std::smatch m;
    if (std::regex_match(part, m, kDim))
      t.shape.push_back(std::stoll(m[1]));
    else if (part.find_first_not_of(" ") != std::string::npos || comma == dims.size())
      throw BadRequest(400,
                       "the .npy shape (" + dims + ") is not a tuple of non-negative integers");
    start = comma + 1;
  }
  if (fortran[1] == "True" && t.shape.size() > 1)
    throw BadRequest(400,
                     "the .npy array is in Fortran order; expected C order (np.ascontiguousarray)");
  const int64_t numel = checked_numel(t.shape, "the .npy array");
  const size_t expected = static_cast<size_t>(numel) * samba_dtype_size(t.dtype);
  const size_t data_at = header_at + header_len;
  if (body.size() - data_at != expected)
    throw BadRequest(400, "the .npy data has " + std::to_string(body.size() - data_at) +
                              " bytes, shape " + shape_text(t.shape) + " of " + descr[1].str() +
                              " needs " + std::to_string(expected));
  t.bytes.assign(body.substr(data_at));
  return t;
}

json encode_json(const HostTensor& t) {
  json data = json::array();
  const size_t size = samba_dtype_size(t.dtype);
  for (size_t at = 0; at + size <= t.bytes.size(); at += size)
    data.push_back(json_value(t.dtype, &t.bytes[at]));
  return {{"shape", t.shape}, {"dtype", samba_dtype_name(t.dtype)}, {"data", std::move(data)}};
}

std::string encode_npy(const HostTensor& t) {
  const char* descr = nullptr;
  for (const NpyType& n : kNpyTypes)
    if (n.dtype == t.dtype) descr = n.descr;
  if (!descr)
    throw BadRequest(406, std::string("dtype ") + samba_dtype_name(t.dtype) + " has no .npy form");
  std::string dims;
  for (int64_t d : t.shape) dims += std::to_string(d) + ",";
  if (t.shape.size() > 1) dims.pop_back();
  std::string header =
      "{'descr': '" + std::string(descr) + "', 'fortran_order': False, 'shape': (" + dims + "), }";
  // Version 1.0: the data starts at a multiple of 64 bytes, the header ends in '\n'.
  const size_t unpadded = 10 + header.size() + 1;
  header.append((64 - unpadded % 64) % 64, ' ');
  header += '\n';
  std::string out("\x93NUMPY\x01\x00", 8);
  out += static_cast<char>(header.size() & 0xff);
  out += static_cast<char>(header.size() >> 8);
  return out + header + t.bytes;
}

}  // namespace samba_server
