/* Logging through the C ABI: a sink receives warnings, the level filters. */
#define _POSIX_C_SOURCE 200809L

#include <stdlib.h>

#include "capi_test_util.h"

static int received = 0;
static char last[512];

static void sink(void* user, int32_t level, const char* message) {
  (void)user;
  if (level == SAMBA_LOG_WARNING) ++received;
  strncpy(last, message, sizeof last - 1);
}

int main(void) {
  samba_session* s = NULL;
  CHECK_OK(samba_session_create(NULL, &s));
  CHECK_OK(samba_set_log_sink(sink, NULL));
  CHECK(setenv("ENABLE_RUNTIME_PERF", "LOUDLY", 1) == 0);
  CHECK_OK(samba_session_start_runtime_profile(s, 0)); /* a bad value: warned, profile off */
  CHECK(received == 1);
  CHECK(strstr(last, "ENABLE_RUNTIME_PERF") != NULL && strstr(last, "LOUDLY") != NULL);
  CHECK_OK(samba_set_log_level(SAMBA_LOG_ERROR));
  CHECK_OK(samba_session_start_runtime_profile(s, 0));
  CHECK(received == 1);
  CHECK_FAILS(samba_set_log_level(7), SAMBA_ERR_INVALID_ARGUMENT, "log level 7");
  CHECK_OK(samba_set_log_level(SAMBA_LOG_WARNING));
  CHECK_OK(samba_set_log_sink(NULL, NULL));
  samba_session_release(s);
  printf("log_test: ok\n");
  return 0;
}
