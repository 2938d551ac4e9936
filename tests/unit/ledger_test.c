/* Proves the ledger-wide rules: ldg_strerror names every code (non-NULL for unknown ones), ldg_ledger_destroy releases every keep still held exactly once, and constructors failing with LDG_ENOMEM change nothing. */
#include <limits.h>

#include "ledger/ledger_testing.h"
#include "tests/unit/check.h"

static void test_strerror(void) {
  const int codes[] = {LDG_OK,         LDG_EINVAL, LDG_ENOMEM,
                       LDG_EDESTROYED, LDG_EDRAIN, LDG_EBUSY};
  enum { NC = sizeof codes / sizeof codes[0] };
  const char *names[NC];
  for (int i = 0; i < NC; i++) {
    names[i] = ldg_strerror(codes[i]);
    CHECK(names[i] != NULL);
    CHECK(names[i][0] != '\0');
    for (int j = 0; j < i; j++) CHECK(strcmp(names[i], names[j]) != 0);
  }
  const int unknown[] = {1, -6, -99, 12345, INT_MIN, INT_MAX};
  for (size_t i = 0; i < sizeof unknown / sizeof unknown[0]; i++) {
    const char *u = ldg_strerror(unknown[i]);
    CHECK(u != NULL);
    CHECK(strcmp(u, names[0]) != 0); /* an unknown code is not "OK" */
  }
  PASS("strerror names every code");
}

/* ldg_ledger_destroy with work everywhere: pending entries, pending waits,
 * a stream only a wait still references, an outstanding handle of a
 * destroyed stream, streams on several devices. */
static void test_ledger_destroy_releases_all(void) {
  ldg_ledger *l = new_ledger();
  rec_log log;
  rec_log_init(&log);
  enum { NS = 6, PER = 5 };
  ldg_stream *s[NS];
  rec_keep k[NS][PER], kd[PER];
  for (int i = 0; i < NS; i++) {
    s[i] = new_stream(l, i % 2, i % 3 == 0);
    for (int j = 0; j < PER; j++) {
      put_vec(s[i], &k[i][j], &log, i * 100 + j, (uint64_t)(i + 1));
      if (j == 2 && i > 0) wait_on(s[i], s[i - 1]); /* s[i] seq 4 */
    }
  }
  ldg_stream *d = new_stream(l, 1, false);
  for (int j = 0; j < PER; j++) put_vec(d, &kd[j], &log, 1000 + j, 99);
  CHECK_OK(ldg_stream_destroy(d)); /* outstanding destroyed handle */
  CHECK_OK(ldg_release(s[1], 3));  /* some released, its wait not fired */
  ldg_stream_unref(s[2]);          /* only s[3]'s wait references s[2] */
  CHECK_EQ(log.total, 3 + PER);
  CHECK_EQ(k[0][0].releases, 0);
  CHECK_EQ(k[2][0].releases, 0);
  rec_keep kn;
  CHECK_OK(ldg_enqueue(s[5], rec_keep_of(&kn, NULL, -1), NULL, 0, NULL, 0,
                       NULL));
  ldg_ledger_destroy(l);
  for (int i = 0; i < NS; i++)
    for (int j = 0; j < PER; j++) CHECK_EQ(k[i][j].releases, 1);
  for (int j = 0; j < PER; j++) CHECK_EQ(kd[j].releases, 1);
  CHECK_EQ(kn.releases, 1);
  CHECK_EQ(log.total, (NS + 1) * PER);
  /* within each stream, seq order */
  for (int i = 0; i < NS; i++)
    for (int j = 0; j + 1 < PER; j++)
      CHECK_BEFORE(&log, i * 100 + j, i * 100 + j + 1);
  /* handles the caller still holds stay valid until unreferenced */
  for (int i = 0; i < NS; i++)
    if (i != 2) ldg_stream_unref(s[i]);
  ldg_stream_unref(d);
  PASS("ledger_destroy releases every keep still held, once");
}

static void test_create_errors(void) {
  CHECK_RC(ldg_ledger_create(NULL), LDG_EINVAL);

  ldg_ledger *l = (ldg_ledger *)0x1;
  ldg__fault_fail_all_allocs(true);
  int rc = ldg_ledger_create(&l);
  ldg__fault_fail_all_allocs(false);
  CHECK_RC(rc, LDG_ENOMEM);

  l = new_ledger();
  ldg_stream *s = NULL;
  ldg__fault_fail_all_allocs(true);
  rc = ldg_stream_create(l, 0, LDG_STREAM_NONBLOCKING, noop_drain, NULL, &s);
  ldg__fault_fail_all_allocs(false);
  CHECK_RC(rc, LDG_ENOMEM);
  CHECK(!ldg_has_nonblocking(l));
  ldg_marks *m = NULL;
  CHECK_OK(ldg_device_marks(l, 0, &m));
  CHECK_EQ(ldg_marks_count(m), 0); /* nothing registered */
  ldg_marks_discard(m);
  /* the refused create did not burn id 1 */
  s = new_stream(l, 0, true);
  CHECK_EQ(ldg_stream_id(s), 1);

  /* device_marks: refused, no references left behind (the unref below
   * destroys the stream at once, and ASan would see a leaked snapshot) */
  rec_log log;
  rec_log_init(&log);
  rec_keep k;
  put_vec(s, &k, &log, 1, 1);
  m = (ldg_marks *)0x1;
  ldg__fault_fail_all_allocs(true);
  rc = ldg_device_marks(l, 0, &m);
  ldg__fault_fail_all_allocs(false);
  CHECK_RC(rc, LDG_ENOMEM);

  /* device_marks growing past its first capacity (in place, references
   * kept): the growth failing leaves no reference behind either */
  {
    ldg_quiesce();
    size_t before = ldg_ledger_bytes(l);
    ldg_stream *many[20];
    for (int i = 0; i < 20; i++) many[i] = new_stream(l, 3, false);
    ldg__fault_fail_alloc_at(2); /* the first allocation is the snapshot */
    rc = ldg_device_marks(l, 3, &m);
    ldg__fault_fail_alloc_at(0);
    CHECK_RC(rc, LDG_ENOMEM);
    CHECK_OK(ldg_device_marks(l, 3, &m));
    CHECK_EQ(ldg_marks_count(m), 20);
    ldg_marks_discard(m);
    for (int i = 0; i < 20; i++) ldg_stream_unref(many[i]);
    ldg_quiesce();
    ldg_ledger_trim(l);
    ldg_quiesce();
    CHECK_LE(ldg_ledger_bytes(l), before); /* all 20 freed */
  }

  /* add_wait: each allocation point failed in turn */
  ldg_stream *b = new_stream(l, 0, false);
  int oks = 0;
  for (long n = 1; n < 32; n++) {
    ldg_seq mb = ldg_mark(b);
    long before = ldg__fault_injected();
    ldg__fault_fail_alloc_at(n);
    rc = ldg_add_wait(b, s, ldg_mark(s), NULL);
    ldg__fault_fail_alloc_at(0);
    long hit = ldg__fault_injected() - before;
    if (rc == LDG_ENOMEM) {
      CHECK_GE(hit, 1);
      CHECK_EQ(ldg_mark(b), mb);
      continue;
    }
    CHECK_OK(rc);
    oks++;
    CHECK_EQ(ldg_mark(b), mb + 1);
    if (hit == 0) break;
  }
  CHECK_GE(oks, 1);
  CHECK_EQ(k.releases, 0);
  CHECK_OK(ldg_release_all(b)); /* the accepted waits fire */
  CHECK_EQ(k.releases, 1);
  ldg_stream_unref(b);
  ldg_quiesce(); /* b's waits (and their references to s) are gone now */

  /* settle_vector: LDG_ENOMEM means nothing was drained or released */
  rec_keep k2;
  put_vec(s, &k2, &log, 2, 2);
  ldg__fault_fail_all_allocs(true);
  rc = ldg_settle_vector(l, 2);
  ldg__fault_fail_all_allocs(false);
  if (rc == LDG_ENOMEM) {
    CHECK_EQ(k2.releases, 0);
    CHECK_EQ(ldg_pending_count(s), 1);
  } else {
    CHECK_OK(rc);
    CHECK_EQ(k2.releases, 1);
  }
  ldg_stream_unref(s); /* the last reference: no snapshot kept one */
  CHECK_EQ(k2.releases, 1);
  CHECK(!ldg_has_nonblocking(l));
  ldg_ledger_destroy(l);
  PASS("constructors failing with ENOMEM change nothing");
}

static int counting_drain(void *ctx) {
  (*(int *)ctx)++;
  return 0;
}

/* settle_vector with many holders and every allocation failing: if it says
 * LDG_ENOMEM, it drained and released nothing and kept no references. */
static void test_settle_enomem(void) {
  enum { NS = 40 };
  ldg_ledger *l = new_ledger();
  ldg_stream *s[NS];
  rec_keep k[NS];
  rec_log log;
  rec_log_init(&log);
  int drains = 0;
  for (int i = 0; i < NS; i++) {
    CHECK_OK(ldg_stream_create(l, 0, LDG_STREAM_NONBLOCKING, counting_drain,
                               &drains, &s[i]));
    put_vec(s[i], &k[i], &log, i, 7);
  }
  ldg__fault_fail_all_allocs(true);
  int rc = ldg_settle_vector(l, 7);
  ldg__fault_fail_all_allocs(false);
  if (rc == LDG_ENOMEM) {
    CHECK_EQ(drains, 0);
    CHECK_EQ(log.total, 0);
  } else {
    CHECK_OK(rc);
    CHECK_EQ(drains, NS);
    CHECK_EQ(log.total, NS);
  }
  for (int i = 0; i < NS; i++) {
    ldg_stream_unref(s[i]); /* the last reference */
    CHECK_EQ(k[i].releases, 1);
  }
  ldg_ledger_destroy(l);
  PASS("settle_vector failing with ENOMEM drains nothing");
}

int main(void) {
  test_strerror();
  test_ledger_destroy_releases_all();
  test_create_errors();
  test_settle_enomem();
  return 0;
}
