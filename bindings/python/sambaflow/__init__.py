"""SambaFlow's import names for Samba: `import sambaflow.samba as samba`,
`from sambaflow.samba.sambaloader import SambaLoader`, ... give the samba
package's own modules (one module object each, never a second copy), so a
SambaFlow app runs without changing its imports."""
import importlib
import importlib.abc
import importlib.util
import sys

_PREFIX = __name__ + ".samba"


class _Alias(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def find_spec(self, fullname, path=None, target=None):
        if fullname == _PREFIX or fullname.startswith(_PREFIX + "."):
            return importlib.util.spec_from_loader(fullname, self)
        return None

    def create_module(self, spec):
        return importlib.import_module("samba" + spec.name[len(_PREFIX):])

    def exec_module(self, module):
        pass  # already executed under its samba.* name


if not any(isinstance(f, _Alias) for f in sys.meta_path):
    sys.meta_path.insert(0, _Alias())

from . import samba  # noqa: E402,F401 - sambaflow.samba.optim.SGD as an attribute path
