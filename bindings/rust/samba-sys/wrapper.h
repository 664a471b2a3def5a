/* What samba-sys binds: the whole C interface as installed (samba.h
 * includes every area header and the generated typed-op functions). */
#include <samba.h>
