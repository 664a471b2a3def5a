// Typed shorthands for the ops C callers use most. Each one names its op,
// its tensor arguments and its attributes; op_call does the rest on the same
// path as samba_op_call.
#include "bindings/c/capi.h"

using namespace samba;
using namespace samba::capi;

namespace {

struct TensorArg {
  const samba_tensor* tensor;
  const char* name;
  bool optional = false;
};

// Runs `op` on `args` with the attributes make_attrs() returns, handing the
// single output to the caller.
template <typename MakeAttrs>
samba_status op_call(const char* fn, samba_session* session, const char* op,
                     std::initializer_list<TensorArg> args, MakeAttrs make_attrs,
                     samba_tensor** out) {
  return guarded(fn, [&] {
    out_param(out, "out");
    std::vector<Tensor> inputs;
    inputs.reserve(args.size());
    for (const TensorArg& a : args) {
      if (!a.tensor && !a.optional) fail(Status::NullPointer, "argument '{}' is NULL", a.name);
      inputs.push_back(a.tensor ? tensor(a.tensor) : Tensor());
    }
    *out = to_handle(run_op1(session, op, inputs, make_attrs()));
  });
}

samba_status op_call(const char* fn, samba_session* session, const char* op,
                     std::initializer_list<TensorArg> args, samba_tensor** out) {
  return op_call(
      fn, session, op, args, [] { return Attrs(); }, out);
}

samba_status reduce_call(const char* fn, samba_session* session, const char* op, samba_tensor* x,
                         const int64_t* dims, size_t ndims, int32_t keepdim, samba_tensor** out) {
  return op_call(
      fn, session, op, {{x, "x"}},
      [&] {
        Attrs a{{"keepdim", keepdim != 0}};
        if (ndims) {
          require(dims, "dims");
          a.set("dim", std::vector<int64_t>(dims, dims + ndims));
        }
        return a;
      },
      out);
}

}  // namespace

extern "C" {

samba_status samba_add(samba_session* s, samba_tensor* a, samba_tensor* b, samba_tensor** out) {
  return op_call(__func__, s, "add", {{a, "a"}, {b, "b"}}, out);
}

samba_status samba_sub(samba_session* s, samba_tensor* a, samba_tensor* b, samba_tensor** out) {
  return op_call(__func__, s, "sub", {{a, "a"}, {b, "b"}}, out);
}

samba_status samba_mul(samba_session* s, samba_tensor* a, samba_tensor* b, samba_tensor** out) {
  return op_call(__func__, s, "mul", {{a, "a"}, {b, "b"}}, out);
}

samba_status samba_div(samba_session* s, samba_tensor* a, samba_tensor* b, samba_tensor** out) {
  return op_call(__func__, s, "div", {{a, "a"}, {b, "b"}}, out);
}

samba_status samba_matmul(samba_session* s, samba_tensor* a, samba_tensor* b, samba_tensor** out) {
  return op_call(__func__, s, "matmul", {{a, "a"}, {b, "b"}}, out);
}

samba_status samba_linear(samba_session* s, samba_tensor* x, samba_tensor* weight,
                          samba_tensor* bias, samba_tensor** out) {
  return op_call(__func__, s, "linear", {{x, "x"}, {weight, "weight"}, {bias, "bias", true}}, out);
}

samba_status samba_relu(samba_session* s, samba_tensor* x, samba_tensor** out) {
  return op_call(__func__, s, "relu", {{x, "x"}}, out);
}

samba_status samba_sigmoid(samba_session* s, samba_tensor* x, samba_tensor** out) {
  return op_call(__func__, s, "sigmoid", {{x, "x"}}, out);
}

samba_status samba_tanh(samba_session* s, samba_tensor* x, samba_tensor** out) {
  return op_call(__func__, s, "tanh", {{x, "x"}}, out);
}

samba_status samba_sum(samba_session* s, samba_tensor* x, const int64_t* dims, size_t ndims,
                       int32_t keepdim, samba_tensor** out) {
  return reduce_call(__func__, s, "sum", x, dims, ndims, keepdim, out);
}

samba_status samba_mean(samba_session* s, samba_tensor* x, const int64_t* dims, size_t ndims,
                        int32_t keepdim, samba_tensor** out) {
  return reduce_call(__func__, s, "mean", x, dims, ndims, keepdim, out);
}

samba_status samba_softmax(samba_session* s, samba_tensor* x, int64_t dim, samba_tensor** out) {
  return op_call(
      __func__, s, "softmax", {{x, "x"}},
      [dim] {
        return Attrs{{"dim", dim}};
      },
      out);
}

samba_status samba_cross_entropy(samba_session* s, samba_tensor* input, samba_tensor* target,
                                 samba_tensor** out) {
  return op_call(__func__, s, "cross_entropy", {{input, "input"}, {target, "target"}}, out);
}

}  // extern "C"
