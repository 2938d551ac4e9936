/* Proves ldg_vector_holders: every pending operation naming the id on every live stream (blocking and non-blocking), with stream id, device and seq in order; the count beyond cap; released and destroyed entries gone; ids in external arrays; bad arguments. */
#include "tests/unit/check.h"

static void test_holders(void) {
  ldg_ledger *l = new_ledger();
  ldg_stream *s = new_stream(l, 0, false);
  ldg_stream *t = new_stream(l, 3, true);
  long n = 0;
  uint64_t five[] = {5};
  uint64_t other[] = {6, 7};
  uint64_t many[40]; /* past the inline words: an external array */
  for (int i = 0; i < 40; i++) many[i] = 100 + (uint64_t)i;
  many[39] = 5;
  CHECK_OK(ldg_enqueue(s, count_keep(&n), five, 1, NULL, 0, NULL)); /* s1 */
  CHECK_OK(ldg_enqueue(s, count_keep(&n), other, 2, NULL, 0, NULL)); /* s2 */
  CHECK_OK(ldg_enqueue(s, count_keep(&n), many, 40, NULL, 0, NULL)); /* s3 */
  CHECK_OK(ldg_enqueue(t, count_keep(&n), other, 2, NULL, 0, NULL)); /* t1 */
  CHECK_OK(ldg_enqueue(t, count_keep(&n), five, 1, NULL, 0, NULL)); /* t2 */
  CHECK_EQ(ldg_vector_holders(l, 9, NULL, 0), 0);
  CHECK_EQ(ldg_vector_holders(l, 5, NULL, 0), 3);
  ldg_holder h[8];
  size_t k = ldg_vector_holders(l, 5, h, 8);
  CHECK_EQ(k, 3);
  int on_s = 0, on_t = 0;
  ldg_seq last_s = 0;
  for (size_t i = 0; i < k; i++) {
    if (h[i].stream_id == ldg_stream_id(s)) {
      CHECK(h[i].device == 0 && !h[i].nonblocking);
      CHECK(h[i].seq == 1 || h[i].seq == 3);
      CHECK(h[i].seq > last_s); /* in sequence order */
      last_s = h[i].seq;
      on_s++;
    } else {
      CHECK_EQ(h[i].stream_id, ldg_stream_id(t));
      CHECK(h[i].device == 3 && h[i].nonblocking && h[i].seq == 2);
      on_t++;
    }
  }
  CHECK(on_s == 2 && on_t == 1);
  /* cap below the count: writes cap, returns all */
  memset(h, 0xAB, sizeof(h));
  CHECK_EQ(ldg_vector_holders(l, 5, h, 1), 3);
  CHECK(h[1].stream_id == 0xABABABABABABABABull); /* untouched */
  CHECK_EQ(ldg_vector_holders(l, 5, NULL, 5), 3); /* out NULL: cap 0 */
  /* released entries are gone */
  CHECK_OK(ldg_release(s, 1));
  k = ldg_vector_holders(l, 5, h, 8);
  CHECK_EQ(k, 2);
  CHECK_EQ(ldg_vector_holders(l, 138, h, 8), 1); /* many[38], external */
  /* destroyed streams hold nothing */
  CHECK_OK(ldg_stream_destroy(t));
  k = ldg_vector_holders(l, 5, h, 8);
  CHECK_EQ(k, 1);
  CHECK(h[0].stream_id == ldg_stream_id(s) && h[0].seq == 3);
  CHECK_EQ(ldg_vector_holders(NULL, 5, h, 8), 0);
  CHECK_OK(ldg_release_all(s));
  CHECK_EQ(ldg_vector_holders(l, 5, h, 8), 0);
  CHECK_EQ(n, 5);
  ldg_stream_unref(s);
  ldg_stream_unref(t);
  ldg_ledger_destroy(l);
}

int main(void) {
  test_holders();
  printf("holders_test: ok\n");
  return 0;
}
