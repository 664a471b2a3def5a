"""SambaLoader: iterates over a data loader's batches as named SambaTensors,
preparing up to `maxsize` batches ahead on a background thread while the
caller runs the graph. Errors of the producer are raised in the consumer
with the producer's message; a batch that does not come within `timeout`
seconds raises TimeoutError; close() (or leaving a loop early and dropping
the iterator) stops and joins the thread."""
import queue
import threading

from .session import session
from .tensor import as_tensor

_END = object()


class _Failure:
    def __init__(self, error):
        self.error = error


class SambaLoader:
    """Iterates `torch_loader` with a producer thread preparing up to `maxsize` batches ahead,
    each a list of SambaTensors whose sn_names are `names` in order (copied into pinned host memory
    when pinned_memory is set); `timeout` bounds the wait for a batch."""

    def __init__(self, torch_loader, names, maxsize=2, timeout=None, pinned_memory=None):
        if maxsize < 1:
            raise ValueError(f"SambaLoader: maxsize must be at least 1, got {maxsize}")
        ## The data loader whose batches are iterated.
        self.loader = torch_loader
        ## The sn_name given to each tensor of a batch, in order.
        self.names = list(names)
        ## How many batches the producer thread prepares ahead.
        self.maxsize = maxsize
        ## Seconds to wait for a batch before TimeoutError (None waits forever).
        self.timeout = timeout
        ## Whether batches are copied into pinned host memory (None: the session's setting).
        self.pinned_memory = pinned_memory
        self._stop = None
        self._thread = None
        self._queue = None

    def __len__(self):
        return len(self.loader)

    def _convert(self, batch):
        items = list(batch) if isinstance(batch, (tuple, list)) else [batch]
        if len(items) != len(self.names):
            raise ValueError(f"SambaLoader: a batch has {len(items)} tensors but {len(self.names)} names were "
                             f"given ({self.names})")
        out = []
        for value, name in zip(items, self.names):
            t = as_tensor(value)
            t.sn_name = name
            if self._pin:
                t.fast_access = True  # copied into pinned memory here, off the caller's thread
            out.append(t)
        return out

    def _produce(self, q, stop):
        try:
            for batch in self.loader:
                item = self._convert(batch)
                while not stop.is_set():
                    try:
                        q.put(item, timeout=0.05)
                        break
                    except queue.Full:
                        continue
                if stop.is_set():
                    return
            item = _END
        except BaseException as e:  # noqa: BLE001 - handed to the consumer
            item = _Failure(e)
        while not stop.is_set():
            try:
                q.put(item, timeout=0.05)
                return
            except queue.Full:
                continue

    def __iter__(self):
        self.close()
        self._pin = session.use_pinned_memory() if self.pinned_memory is None else self.pinned_memory
        self._queue = queue.Queue(maxsize=self.maxsize)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._produce, args=(self._queue, self._stop),
                                        name="SambaLoader", daemon=True)
        self._thread.start()
        return self._iterate(self._queue)

    def _iterate(self, q):
        try:
            while True:
                try:
                    item = q.get(timeout=self.timeout)
                except queue.Empty:
                    raise TimeoutError(f"SambaLoader: no batch came within {self.timeout} s") from None
                if item is _END:
                    return
                if isinstance(item, _Failure):
                    # The producer's own exception: its type, message and traceback.
                    raise item.error
                yield tuple(item)
        finally:
            if q is self._queue:
                self.close()

    def close(self):
        """Stops the producer thread and waits for it."""
        if self._thread is not None:
            self._stop.set()
            self._thread.join()
            self._thread = None

    def __del__(self):
        try:
            self.close()
        except Exception:  # noqa: BLE001 - interpreter shutdown
            pass
