package samba

/*
#include <stdlib.h>
#include "samba.h"
*/
import "C"

import (
	"runtime"
	"sort"
	"unsafe"
)

// SaveSafetensors saves the device values of the loaded PEF's tensors of
// kinds what (gradients excluded) to path in the Hugging Face safetensors
// format, which safetensors.torch.load_file reads; optimizer state is named
// "<parameter>.<state>". Written atomically, like a checkpoint; for full
// training state SaveCheckpoint is the format.
func (s *Session) SaveSafetensors(path string, what Transfer) error {
	defer pin()()
	err := setString(func(c *C.char) C.samba_status {
		return C.samba_session_save_safetensors(s.h, c, C.samba_transfer_kinds(what))
	}, path)
	runtime.KeepAlive(s)
	return err
}

// LoadSafetensors loads a safetensors file (a Hugging Face save_pretrained
// output, or SaveSafetensors') into the device tensors of kinds what,
// matched by name after nameMap: each key replaces a leading key of a file
// tensor's name by its value ({"transformer.": ""} strips a prefix); a key
// equal to the whole name wins, then the longest matching key. Values are
// converted to each target's dtype. With strict, every file tensor needs a
// target and every selected tensor must be in the file. The whole file is
// checked before any tensor changes: on failure none has.
func (s *Session) LoadSafetensors(path string, what Transfer, nameMap map[string]string, strict bool) error {
	defer pin()()
	// The rules' order does not change their meaning; sorting keeps the
	// calls (and their error messages) reproducible.
	from := make([]string, 0, len(nameMap))
	for k := range nameMap {
		from = append(from, k)
	}
	sort.Strings(from)
	to := make([]string, len(from))
	for i, k := range from {
		to[i] = nameMap[k]
	}
	cfrom, freeFrom := cstrings(from)
	defer freeFrom()
	cto, freeTo := cstrings(to)
	defer freeTo()
	cpath := C.CString(path)
	defer C.free(unsafe.Pointer(cpath))
	err := check(C.samba_session_load_safetensors(s.h, cpath, C.samba_transfer_kinds(what), firstOrNil(cfrom),
		firstOrNil(cto), C.size_t(len(from)), cbool(strict)))
	runtime.KeepAlive(s)
	return err
}
