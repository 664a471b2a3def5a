"""SambaLoader as a distributed sampler, each rank built in this process with
an explicit rank and world size (what utils.get_rank and get_world_size give
under mpirun): the ranks' shares are disjoint, cover the epoch (up to the
dropped remainder), are equally long, shuffle alike from the same seed,
reshuffle each epoch; a plain loader in a plain process is unchanged."""
import numpy as np
import pytest
import torch
import torch.utils.data as data

from sambaflow.samba.sambaloader import SambaLoader


def _samples(loader):
    """The sample ids of one epoch of `loader`, batch by batch."""
    return [[int(v) for v in np.asarray(x.numpy()).reshape(-1)] for x, _ in loader]


def _dataset(n):
    ids = torch.arange(n, dtype=torch.int64)
    return data.TensorDataset(ids, ids * 10)


def _shares(make, world):
    return [_samples(make(r)) for r in range(world)]


def _check_partition(shares, total, per_rank_batches):
    flat = [s for share in shares for batch in share for s in batch]
    assert len(flat) == len(set(flat)), "a sample went to two ranks"
    assert set(flat) <= set(range(total))
    assert all(len(share) == per_rank_batches for share in shares), [len(s) for s in shares]
    return flat


@pytest.mark.parametrize("world", [2, 3, 4])
def test_torch_dataloader_is_split_like_distributed_sampler(world):
    loader = data.DataLoader(_dataset(50), batch_size=4)
    shares = _shares(lambda r: SambaLoader(loader, ["x", "y"], rank=r, world_size=world, shuffle=True, seed=7), world)
    per_rank = 50 // world
    flat = _check_partition(shares, 50, -(-per_rank // 4))
    assert len(flat) == per_rank * world  # only the remainder is dropped
    # Shuffled: not the in-order deal.
    assert shares[0][0] != list(range(0, 4 * world, world))[:4]
    # Same seed on every rank: building rank 0 again gives the same share; another seed another.
    assert _samples(SambaLoader(loader, ["x", "y"], rank=0, world_size=world, shuffle=True, seed=7)) == shares[0]
    assert _samples(SambaLoader(loader, ["x", "y"], rank=0, world_size=world, shuffle=True, seed=8)) != shares[0]


def test_each_epoch_reshuffles_the_same_way_on_every_rank():
    loader = data.DataLoader(_dataset(40), batch_size=5)
    ranks = [SambaLoader(loader, ["x", "y"], rank=r, world_size=2, shuffle=True, seed=3) for r in range(2)]
    epoch1 = [_samples(r) for r in ranks]
    epoch2 = [_samples(r) for r in ranks]
    _check_partition(epoch1, 40, 4)
    _check_partition(epoch2, 40, 4)
    assert epoch1 != epoch2
    again = [SambaLoader(loader, ["x", "y"], rank=r, world_size=2, shuffle=True, seed=3) for r in range(2)]
    assert [_samples(r) for r in again] == epoch1


def _batches(n_batches, batch=3):
    for b in range(n_batches):
        ids = torch.arange(b * batch, (b + 1) * batch, dtype=torch.int64)
        yield ids, ids * 10


def test_an_iterable_of_batches_is_dealt_in_whole_rounds():
    # 11 batches over 3 ranks: rank r gets r, r + 3, r + 6; batches 9 and 10 are dropped.
    shares = _shares(lambda r: SambaLoader(_batches(11), ["x", "y"], rank=r, world_size=3), 3)
    _check_partition(shares, 33, 3)
    assert [b[0] // 3 for b in shares[1]] == [1, 4, 7]
    # The ranks' batches together are what one process sees at the batch times 3.
    merged = sorted(s for share in shares for batch in share for s in batch)
    assert merged == list(range(27))


def test_a_list_of_batches_shuffles_from_the_seed():
    batches = list(_batches(8))
    shares = _shares(lambda r: SambaLoader(batches, ["x", "y"], rank=r, world_size=2, shuffle=True, seed=11), 2)
    _check_partition(shares, 24, 4)
    assert [b[0] for b in shares[0]] != [0, 6, 12, 18]
    assert len(SambaLoader(batches, ["x", "y"], rank=1, world_size=2)) == 4


def test_plain_process_is_unsharded_and_bad_arguments_are_refused():
    loader = data.DataLoader(_dataset(12), batch_size=4)
    assert _samples(SambaLoader(loader, ["x", "y"])) == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9, 10, 11]]
    with pytest.raises(ValueError, match="rank 2 of world size 2"):
        SambaLoader(loader, ["x", "y"], rank=2, world_size=2)
    with pytest.raises(ValueError, match="shuffle needs"):
        SambaLoader(_batches(4), ["x", "y"], shuffle=True)
