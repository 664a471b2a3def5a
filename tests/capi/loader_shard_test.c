/* The loader as a distributed sampler through the C ABI: ranks given the
 * same shard options get disjoint shares that cover the epoch (the
 * remainder dropped) and the same number of batches each; a shuffle seed
 * gives every rank the same epoch order, a new one after reset, and the
 * same again from the same seed; a loader without the global batch count,
 * or with a rank outside the world, is refused by name. */
#include <stdint.h>

#include "capi_test_util.h"

#define MAX_BATCHES 64

/* Batch `index` is one int64 holding the index: the batch says which global
 * batch the loader asked for. */
static samba_status produce(void* user, int64_t index, samba_tensor** out, size_t n, int32_t* end) {
  const int64_t shape[1] = {1};
  (void)user;
  (void)end;
  if (n != 1) return SAMBA_ERR_INVALID_ARGUMENT;
  out[0] = make_i64(&index, shape, 1);
  return SAMBA_OK;
}

/* The global batch indices the rest of the loader's epoch gives, in order,
 * into `got`; returns how many. */
static int take_epoch(samba_loader* l, int64_t* got) {
  samba_tensor* b[1];
  int32_t end = 0;
  int count = 0;
  for (;;) {
    CHECK_OK(samba_loader_next(l, b, 1, &end));
    if (end) return count;
    CHECK(count < MAX_BATCHES);
    CHECK_OK(samba_tensor_copy_to(b[0], &got[count], sizeof(int64_t)));
    samba_tensor_release(b[0]);
    ++count;
  }
}

static samba_loader* make_loader(int32_t rank, int32_t world, int64_t num_batches, int64_t seed) {
  static const char* names[1] = {"x"};
  samba_loader_options* o = NULL;
  samba_loader* l = NULL;
  CHECK_OK(samba_loader_options_create(&o));
  CHECK_OK(samba_loader_options_set_num_batches(o, num_batches));
  CHECK_OK(samba_loader_options_set_shard(o, rank, world));
  if (seed >= 0) CHECK_OK(samba_loader_options_set_shuffle_seed(o, (uint64_t)seed));
  CHECK_OK(samba_loader_create(names, 1, produce, NULL, NULL, o, &l));
  samba_loader_options_release(o);
  return l;
}

/* Every rank of `world` over `num_batches` (`seed` < 0: in order): each
 * gets num_batches / world, no batch twice, all within range; rank 0's
 * share goes to `first_of_rank0` when given. */
static void check_partition(int32_t world, int64_t num_batches, int64_t seed, int64_t first_of_rank0[MAX_BATCHES]) {
  int seen[MAX_BATCHES] = {0};
  int32_t r;
  int k, total = 0;
  for (r = 0; r < world; ++r) {
    int64_t got[MAX_BATCHES];
    samba_loader* l = make_loader(r, world, num_batches, seed);
    const int n = take_epoch(l, got);
    CHECK(n == (int)(num_batches / world));
    for (k = 0; k < n; ++k) {
      CHECK(got[k] >= 0 && got[k] < num_batches);
      CHECK(seen[got[k]] == 0);
      seen[got[k]] = 1;
      if (r == 0 && first_of_rank0) first_of_rank0[k] = got[k];
    }
    total += n;
    samba_loader_release(l);
  }
  CHECK(total == (int)(num_batches - num_batches % world));
}

int main(void) {
  int64_t a[MAX_BATCHES], b[MAX_BATCHES], c[MAX_BATCHES];
  int k, n, differs = 0;

  /* In order: rank r gets r, r + W, ...; 10 batches over 3 ranks drop one. */
  check_partition(3, 10, -1, NULL);
  {
    samba_loader* l = make_loader(1, 3, 10, -1);
    n = take_epoch(l, a);
    CHECK(n == 3 && a[0] == 1 && a[1] == 4 && a[2] == 7);
    samba_loader_release(l);
  }
  /* World size 1 is the whole epoch. */
  check_partition(1, 7, -1, NULL);

  /* Shuffled: still a partition; the same seed gives every rank the same
   * order (so rank 0's share repeats), another seed another order. */
  check_partition(4, 32, 1234, a);
  check_partition(4, 32, 1234, b);
  for (k = 0; k < 8; ++k) CHECK(a[k] == b[k]);
  check_partition(4, 32, 99, c);
  for (k = 0; k < 8; ++k) differs |= a[k] != c[k];
  CHECK(differs);
  /* The shuffle is not the identity order. */
  differs = 0;
  for (k = 0; k < 8; ++k) differs |= a[k] != 4 * k;
  CHECK(differs);

  /* A new epoch after reset: a new order, still this rank's share size. */
  {
    samba_loader* l = make_loader(0, 4, 32, 1234);
    n = take_epoch(l, b);
    CHECK(n == 8);
    for (k = 0; k < 8; ++k) CHECK(a[k] == b[k]);
    CHECK_OK(samba_loader_reset(l));
    n = take_epoch(l, c);
    CHECK(n == 8);
    differs = 0;
    for (k = 0; k < 8; ++k) differs |= b[k] != c[k];
    CHECK(differs);
    samba_loader_release(l);
  }

  /* Bad input: a rank outside the world, sharding or shuffling without the
   * epoch's global batch count. */
  {
    static const char* names[1] = {"x"};
    samba_loader_options* o = NULL;
    samba_loader* l = NULL;
    CHECK_OK(samba_loader_options_create(&o));
    CHECK_FAILS(samba_loader_options_set_shard(o, 2, 2), SAMBA_ERR_INVALID_ARGUMENT, "rank 2 of world size 2");
    CHECK_FAILS(samba_loader_options_set_shard(o, 0, 0), SAMBA_ERR_INVALID_ARGUMENT, "world size 0");
    CHECK_FAILS(samba_loader_options_set_shard(NULL, 0, 1), SAMBA_ERR_NULL_POINTER, "opts");
    CHECK_OK(samba_loader_options_set_shard(o, 1, 2));
    CHECK_FAILS(samba_loader_create(names, 1, produce, NULL, NULL, o, &l), SAMBA_ERR_INVALID_ARGUMENT,
                "needs num_batches");
    CHECK_OK(samba_loader_options_set_shard(o, 0, 1));
    CHECK_OK(samba_loader_options_set_shuffle_seed(o, 5));
    CHECK_FAILS(samba_loader_create(names, 1, produce, NULL, NULL, o, &l), SAMBA_ERR_INVALID_ARGUMENT,
                "shuffling needs num_batches");
    CHECK(l == NULL);
    samba_loader_options_release(o);
  }
  return 0;
}
