#include "engine/runtime/session.h"

namespace samba {

Session::Session(const SessionOptions& opts)
    : pool_(std::make_unique<ThreadPool>(opts.threads)), seed_(opts.seed) {}

}  // namespace samba
