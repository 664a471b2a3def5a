/* Compiled with -std=c99 -pedantic -Werror: samba.h must be plain C99. */
#include "samba.h"

int samba_header_compiles_as_c99(void) { return SAMBA_VERSION_MAJOR >= 0 && SAMBA_OK == 0; }

/* Without SAMBA_EXPERIMENTAL the experimental tier stays hidden. */
#ifdef SAMBA_EXPERIMENTAL_H_DECLARED
#error "samba.h declared the experimental tier without SAMBA_EXPERIMENTAL"
#endif
