"""SambaLoader: iterates over a data loader's batches as named SambaTensors,
preparing up to `maxsize` batches ahead on a background thread while the
caller runs the graph. Errors of the producer are raised in the consumer
with the producer's message; a batch that does not come within `timeout`
seconds raises TimeoutError; close() (or leaving a loop early and dropping
the iterator) stops and joins the thread.

In a data-parallel job each replica gets its share of every epoch, as
torch's DistributedSampler gives it: disjoint shares that together cover
the epoch, the same shuffle (from `seed` and the epoch number) on every
rank, and the same number of batches on every rank, so the replicas step
together through the gradient all-reduce."""
import itertools
import queue
import random
import threading

from . import distributed
from .session import session
from .tensor import as_tensor

_END = object()


class _Failure:
    def __init__(self, error):
        self.error = error


def _is_torch_map_loader(loader):
    """A torch DataLoader over a map-style dataset, batched by batch_size:
    one whose sampler can be replaced by a DistributedSampler."""
    dataset = getattr(loader, "dataset", None)
    return (type(loader).__name__ == "DataLoader" and getattr(loader, "batch_size", None) is not None
            and hasattr(dataset, "__len__") and hasattr(dataset, "__getitem__"))


class SambaLoader:
    """Iterates `torch_loader` with a producer thread preparing up to `maxsize` batches ahead,
    each a list of SambaTensors whose sn_names are `names` in order (copied into pinned host memory
    when pinned_memory is set); `timeout` bounds the wait for a batch.

    shard (None: when utils.is_distributed()) takes this rank's share of each
    epoch (rank, world_size default to the job's). A torch DataLoader over a
    map-style dataset is re-made with a DistributedSampler (drop_last, so
    every rank gets as many samples; shuffle with `seed`, reshuffled each
    epoch). Any other iterable of batches is dealt out a batch at a time:
    rank r takes batches r, r + world_size, ... and a last round too short
    for every rank is dropped; with shuffle, the batches of a sequence (a
    list) are first permuted from (seed, epoch)."""

    def __init__(self, torch_loader, names, maxsize=2, timeout=None, pinned_memory=None, shard=None, shuffle=False,
                 seed=0, rank=None, world_size=None):
        if maxsize < 1:
            raise ValueError(f"SambaLoader: maxsize must be at least 1, got {maxsize}")
        if shard is None:
            shard = world_size is not None or distributed.is_distributed()
        ## This replica's rank (0 when not sharding).
        self.rank = (distributed.get_rank() if rank is None else rank) if shard else 0
        ## The job's world size: how many shares an epoch is cut into (1 when not sharding).
        self.world_size = (distributed.get_world_size() if world_size is None else world_size) if shard else 1
        if not 0 <= self.rank < self.world_size:
            raise ValueError(f"SambaLoader: rank {self.rank} of world size {self.world_size}; expected "
                             f"0 <= rank < world_size")
        ## Whether each epoch's order is shuffled from (seed, epoch), the same on every rank.
        self.shuffle = bool(shuffle)
        ## The shuffle seed: give every rank the same one.
        self.seed = seed
        ## Epochs started so far (each __iter__ starts one).
        self.epoch = 0
        self._sampler = None
        if (self.world_size > 1 or self.shuffle) and _is_torch_map_loader(torch_loader):
            torch_loader, self._sampler = self._distributed_loader(torch_loader)
        elif self.shuffle and not (hasattr(torch_loader, "__len__") and hasattr(torch_loader, "__getitem__")):
            raise ValueError("SambaLoader: shuffle needs a torch DataLoader over a map-style dataset or a sequence "
                             f"of batches; got a {type(torch_loader).__name__}")
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

    def _distributed_loader(self, loader):
        import torch.utils.data as data  # only reached with a torch DataLoader

        sampler = data.distributed.DistributedSampler(loader.dataset, num_replicas=self.world_size, rank=self.rank,
                                                      shuffle=self.shuffle, seed=self.seed, drop_last=True)
        return data.DataLoader(loader.dataset, batch_size=loader.batch_size, sampler=sampler,
                               num_workers=loader.num_workers, collate_fn=loader.collate_fn,
                               pin_memory=loader.pin_memory, drop_last=loader.drop_last,
                               timeout=loader.timeout, worker_init_fn=loader.worker_init_fn), sampler

    def __len__(self):
        """This rank's batches per epoch."""
        if self._sampler is not None or self.world_size == 1:
            return len(self.loader)
        return len(self.loader) // self.world_size

    def _epoch_batches(self, epoch):
        """This rank's batches of `epoch`, as the producer iterates them."""
        if self._sampler is not None:
            self._sampler.set_epoch(epoch)
            return iter(self.loader)
        source = batches = self.loader
        if self.shuffle:
            order = list(range(len(source)))
            random.Random(self.seed * 1_000_003 + epoch).shuffle(order)
            batches = (source[i] for i in order)
        if self.world_size == 1:
            return iter(batches)
        return self._deal(iter(batches))

    def _deal(self, batches):
        # Whole rounds only: every rank must get as many batches, so a last
        # round without one for each rank is dropped.
        while True:
            round_ = list(itertools.islice(batches, self.world_size))
            if len(round_) < self.world_size:
                return
            yield round_[self.rank]

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

    def _produce(self, q, stop, batches):
        try:
            for batch in batches:
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
        batches = self._epoch_batches(self.epoch)
        self.epoch += 1
        self._thread = threading.Thread(target=self._produce, args=(self._queue, self._stop, batches),
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
