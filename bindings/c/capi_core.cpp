// Version, errors, dtypes, sessions and attribute sets.
#include <string>

#include "bindings/c/capi.h"
#include "engine/core/isa.h"
#include "engine/core/log.h"

namespace samba::capi {
namespace {
struct LastError {
  samba_status code = SAMBA_OK;
  std::string message;
};
LastError& last_error() {
  thread_local LastError e;
  return e;
}
}  // namespace

samba_status set_error(const char* fn, samba_status code, const char* message) {
  try {
    auto& e = last_error();
    e.code = code;
    e.message = fmt::format("{}: {}", fn, message);
  } catch (...) {
    // Keep the status even if the message cannot be stored.
  }
  return code;
}

void clear_error() {
  auto& e = last_error();
  e.code = SAMBA_OK;
  e.message.clear();
}

void fail_from_callback(samba_status st, std::string_view callback) {
  const Status code = st > 0 && st <= SAMBA_ERR_INTERNAL ? static_cast<Status>(st) : Status::InvalidArgument;
  const std::string& m = last_error().message;
  fail(code, "{} returned {}{}{}", callback, samba_status_name(st), m.empty() ? "" : ": ", m);
}

DType checked_dtype(samba_dtype d, const char* what) {
  SAMBA_CHECK(is_valid_dtype(d), Status::InvalidArgument,
              "{} {} is not a dtype code (expected 0..{})", what, d, kNumDTypes - 1);
  return static_cast<DType>(d);
}

Dims checked_dims(const int64_t* shape, size_t ndim, const char* what) {
  SAMBA_CHECK(ndim <= static_cast<size_t>(kMaxRank), Status::InvalidArgument,
              "{} has rank {}; at most {} dimensions are supported", what, ndim, kMaxRank);
  if (ndim) require(shape, what);
  Dims d(shape, shape + ndim);
  check_shape(d);
  return d;
}

}  // namespace samba::capi

using namespace samba;
using namespace samba::capi;

extern "C" {

#define SAMBA_STRINGIFY_(x) #x
#define SAMBA_STRINGIFY(x) SAMBA_STRINGIFY_(x)
const char* samba_version(void) {
  return SAMBA_STRINGIFY(SAMBA_VERSION_MAJOR) "." SAMBA_STRINGIFY(SAMBA_VERSION_MINOR) "." SAMBA_STRINGIFY(
      SAMBA_VERSION_PATCH);
}
int32_t samba_version_number(void) {
  return SAMBA_VERSION_MAJOR * 10000 + SAMBA_VERSION_MINOR * 100 + SAMBA_VERSION_PATCH;
}

// isa_name returns views of string literals, so the pointer is static.
const char* samba_isa_name(void) { return isa_name(active_isa()).data(); }

const char* samba_last_error_message(void) { return last_error().message.c_str(); }

samba_status samba_set_log_level(int32_t level) {
  return SAMBA_GUARDED({
    SAMBA_CHECK(level >= SAMBA_LOG_ERROR && level <= SAMBA_LOG_DEBUG, Status::InvalidArgument,
                "log level {} is unknown; expected SAMBA_LOG_ERROR (0) .. SAMBA_LOG_DEBUG (3)", level);
    log::set_level(static_cast<log::Level>(level));
  });
}

samba_status samba_set_log_sink(samba_log_fn sink, void* user_data) {
  return SAMBA_GUARDED({
    if (!sink) {
      log::set_sink({});
      return;
    }
    log::set_sink([sink, user_data](log::Level l, std::string_view message) {
      const std::string text(message);
      sink(user_data, static_cast<int32_t>(l), text.c_str());
    });
  });
}
samba_status samba_last_error_code(void) { return last_error().code; }

samba_status samba_set_error_message(samba_status code, const char* message) {
  auto& e = last_error();
  try {
    e.code = code;
    e.message = message ? message : "";
  } catch (...) {
    return SAMBA_ERR_OUT_OF_MEMORY;
  }
  return SAMBA_OK;
}

const char* samba_status_name(samba_status s) {
  static const char* const kNames[] = {"SAMBA_OK",
                                       "SAMBA_ERR_INVALID_ARGUMENT",
                                       "SAMBA_ERR_NULL_POINTER",
                                       "SAMBA_ERR_OUT_OF_RANGE",
                                       "SAMBA_ERR_SHAPE_MISMATCH",
                                       "SAMBA_ERR_DTYPE_MISMATCH",
                                       "SAMBA_ERR_NOT_FOUND",
                                       "SAMBA_ERR_OUT_OF_MEMORY",
                                       "SAMBA_ERR_UNSUPPORTED",
                                       "SAMBA_ERR_INVALID_STATE",
                                       "SAMBA_ERR_IO",
                                       "SAMBA_ERR_CORRUPT_FILE",
                                       "SAMBA_ERR_VERSION_MISMATCH",
                                       "SAMBA_ERR_TIMEOUT",
                                       "SAMBA_ERR_CANCELLED",
                                       "SAMBA_ERR_INTERNAL"};
  if (s < 0 || static_cast<size_t>(s) >= sizeof(kNames) / sizeof(kNames[0]))
    return "unknown status";
  return kNames[s];
}

const char* samba_dtype_name(samba_dtype d) {
  return is_valid_dtype(d) ? dtype_name(static_cast<DType>(d)).data() : nullptr;
}

size_t samba_dtype_size(samba_dtype d) {
  return is_valid_dtype(d) ? element_size(static_cast<DType>(d)) : 0;
}

samba_status samba_dtype_from_name(const char* name, samba_dtype* out) {
  return SAMBA_GUARDED({
    require(name, "name");
    require(out, "out");
    auto d = dtype_from_name(name);
    SAMBA_CHECK(
        d.has_value(), Status::InvalidArgument,
        "unknown dtype name '{}' (expected float32, bfloat16, float16, float64, int64, int32, "
        "int16, int8, uint8 or bool)",
        name);
    *out = static_cast<samba_dtype>(*d);
  });
}

samba_status samba_promote_types(samba_dtype a, samba_dtype b, samba_dtype* out) {
  return SAMBA_GUARDED({
    require(out, "out");
    *out = static_cast<samba_dtype>(promote_types(checked_dtype(a, "a"), checked_dtype(b, "b")));
  });
}

samba_status samba_session_options_create(samba_session_options** out) {
  return SAMBA_GUARDED({
    out_param(out, "out");
    *out = new samba_session_options();
  });
}

samba_status samba_session_options_set_num_threads(samba_session_options* o, int32_t threads) {
  return SAMBA_GUARDED({
    require(o, "opts");
    SAMBA_CHECK(threads <= 1024, Status::InvalidArgument, "threads = {} is too many (at most 1024)",
                threads);
    o->impl.threads = threads;
  });
}

samba_status samba_session_options_set_seed(samba_session_options* o, uint64_t seed) {
  return SAMBA_GUARDED({
    require(o, "opts");
    o->impl.seed = seed;
  });
}

void samba_session_options_release(samba_session_options* o) { delete o; }

samba_status samba_session_create(const samba_session_options* opts, samba_session** out) {
  return SAMBA_GUARDED({
    out_param(out, "out");
    *out = new samba_session(opts ? opts->impl : SessionOptions{});
  });
}

void samba_session_release(samba_session* s) { delete s; }

samba_status samba_session_num_threads(const samba_session* s, int32_t* out) {
  return SAMBA_GUARDED({
    require(s, "session");
    require(out, "out");
    *out = const_cast<samba_session*>(s)->impl.pool().threads();
  });
}

samba_status samba_session_set_seed(samba_session* s, uint64_t seed) {
  return SAMBA_GUARDED({
    require(s, "session");
    s->impl.set_seed(seed);
  });
}

samba_status samba_attrs_create(samba_attrs** out) {
  return SAMBA_GUARDED({
    out_param(out, "out");
    *out = new samba_attrs();
  });
}

void samba_attrs_release(samba_attrs* a) { delete a; }

static samba_status set_attr(const char* fn, samba_attrs* a, const char* name, AttrValue v) {
  return guarded(fn, [&] {
    require(a, "attrs");
    require(name, "name");
    a->impl.set(name, std::move(v));
  });
}

samba_status samba_attrs_set_int(samba_attrs* a, const char* name, int64_t v) {
  return set_attr(__func__, a, name, v);
}
samba_status samba_attrs_set_float(samba_attrs* a, const char* name, double v) {
  return set_attr(__func__, a, name, v);
}
samba_status samba_attrs_set_bool(samba_attrs* a, const char* name, int32_t v) {
  return set_attr(__func__, a, name, v != 0);
}
samba_status samba_attrs_set_string(samba_attrs* a, const char* name, const char* v) {
  if (!v) return set_error(__func__, SAMBA_ERR_NULL_POINTER, "argument 'value' is NULL");
  return set_attr(__func__, a, name, std::string(v));
}
samba_status samba_attrs_set_ints(samba_attrs* a, const char* name, const int64_t* v, size_t n) {
  if (n && !v) return set_error(__func__, SAMBA_ERR_NULL_POINTER, "argument 'values' is NULL");
  return set_attr(__func__, a, name, std::vector<int64_t>(v, v + n));
}
samba_status samba_attrs_set_floats(samba_attrs* a, const char* name, const double* v, size_t n) {
  if (n && !v) return set_error(__func__, SAMBA_ERR_NULL_POINTER, "argument 'values' is NULL");
  return set_attr(__func__, a, name, std::vector<double>(v, v + n));
}
samba_status samba_attrs_set_dtype(samba_attrs* a, const char* name, samba_dtype v) {
  if (!is_valid_dtype(v))
    return set_error(__func__, SAMBA_ERR_INVALID_ARGUMENT,
                     fmt::format("{} is not a dtype code", v).c_str());
  return set_attr(__func__, a, name, static_cast<DType>(v));
}

}  // extern "C"
