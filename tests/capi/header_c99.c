/* Compiled with -std=c99 -pedantic -Werror: samba.h must be plain C99. */
#include "samba.h"

int samba_header_compiles_as_c99(void) { return SAMBA_VERSION_MAJOR >= 0 && SAMBA_OK == 0; }
