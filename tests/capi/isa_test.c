/* The kernels' ISA level through the C ABI. Run by ctest with SAMBA_ISA set
 * and SAMBA_TEST_EXPECT_ISA naming what must be selected ("best" for the
 * level the machine would use unforced), SAMBA_TEST_EXPECT_WARNINGS the
 * number of warnings the choice must log (0 or 1). */
#define _POSIX_C_SOURCE 200809L

#include <stdlib.h>

#include "capi_test_util.h"

static int warnings = 0;
static char last[512];

static void sink(void* user, int32_t level, const char* message) {
  (void)user;
  if (level == SAMBA_LOG_WARNING) ++warnings;
  strncpy(last, message, sizeof last - 1);
}

static int known(const char* name) {
  static const char* const kLevels[] = {"generic", "avx2", "avx512", "avx512_bf16"};
  size_t i;
  for (i = 0; i < sizeof kLevels / sizeof kLevels[0]; ++i)
    if (strcmp(name, kLevels[i]) == 0) return 1;
  return 0;
}

int main(void) {
  const char* expect = getenv("SAMBA_TEST_EXPECT_ISA");
  const char* expect_warnings = getenv("SAMBA_TEST_EXPECT_WARNINGS");
  const char* name;
  CHECK_OK(samba_set_log_sink(sink, NULL));
  name = samba_isa_name();
  CHECK(name != NULL && known(name));
  /* Chosen once: a second call neither changes the answer nor warns again. */
  CHECK(strcmp(samba_isa_name(), name) == 0);
  if (expect && strcmp(expect, "best") != 0) CHECK(strcmp(name, expect) == 0);
  if (expect_warnings) {
    CHECK(warnings == atoi(expect_warnings));
    if (warnings) CHECK(strstr(last, "SAMBA_ISA") != NULL && strstr(last, name) != NULL);
  }
  CHECK_OK(samba_set_log_sink(NULL, NULL));
  printf("isa_test: %s, ok\n", name);
  return 0;
}
