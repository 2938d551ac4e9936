/*
 * Reference model of the streamledger contract; see model.h.
 */
#include "tests/differential/model.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void *xrealloc(void *p, size_t n) {
  void *q = realloc(p, n ? n : 1);
  if (q == NULL) {
    fprintf(stderr, "model: out of memory\n");
    abort();
  }
  return q;
}

#define GROW(arr, n, cap)                                        \
  do {                                                           \
    if ((n) == (cap)) {                                          \
      (cap) = (cap) ? 2 * (cap) : 16;                            \
      (arr) = xrealloc((arr), (cap) * sizeof *(arr));            \
    }                                                            \
  } while (0)

void mdl_init(mdl *m) {
  memset(m, 0, sizeof *m);
  m->actions = true;
}

void mdl_fini(mdl *m) {
  for (size_t i = 0; i < m->n_s; i++) free(m->s[i].items);
  for (size_t i = 0; i < m->n_snap; i++) {
    free(m->snap[i].stream);
    free(m->snap[i].mark);
  }
  free(m->s);
  free(m->snap);
  free(m->fired);
  free(m->w_stream);
  free(m->w_upto);
  memset(m, 0, sizeof *m);
}

void mdl_clear_fired(mdl *m) { m->n_fired = 0; }

static bool is_stream(const mdl *m, int s) {
  return s >= 0 && (size_t)s < m->n_s;
}

/* ---- Releasing ----------------------------------------------------------- */

static void work_push(mdl *m, int s, ldg_seq upto) {
  if ((m->n_w) == (m->cap_w)) {
    m->cap_w = m->cap_w ? 2 * m->cap_w : 16;
    m->w_stream = xrealloc(m->w_stream, m->cap_w * sizeof *m->w_stream);
    m->w_upto = xrealloc(m->w_upto, m->cap_w * sizeof *m->w_upto);
  }
  m->w_stream[m->n_w] = s;
  m->w_upto[m->n_w] = upto;
  m->n_w++;
}

/* Releases s to upto, transitively (see model.h). */
static void release_closure(mdl *m, int s0, ldg_seq upto0) {
  m->n_w = 0;
  work_push(m, s0, upto0);
  while (m->n_w > 0) {
    m->n_w--;
    int s = m->w_stream[m->n_w];
    ldg_seq upto = m->w_upto[m->n_w];
    mdl_stream *st = &m->s[s];
    if (st->destroyed || upto <= st->released) continue;
    if (upto > st->mark) {
      fprintf(stderr, "model: release past the mark (internal error)\n");
      abort();
    }
    st->released = upto;
    size_t k = 0;
    while (k < st->n_items && st->items[k].seq <= upto) {
      const mdl_item *it = &st->items[k];
      if (it->is_wait) {
        work_push(m, it->target, it->upto);
      } else {
        if (it->keep >= 0) {
          GROW(m->fired, m->n_fired, m->cap_fired);
          m->fired[m->n_fired++] = it->keep;
        }
        if (m->actions && it->act_stream >= 0)
          work_push(m, it->act_stream, it->act_upto);
      }
      k++;
    }
    memmove(st->items, st->items + k, (st->n_items - k) * sizeof *st->items);
    st->n_items -= k;
  }
}

/* ---- Streams ------------------------------------------------------------- */

unsigned mdl_expect_stream_create(bool l_null, bool out_null, int device,
                                  unsigned flags, bool has_drain) {
  if (l_null || out_null || device < 0 ||
      (flags & ~(LDG_STREAM_NONBLOCKING | LDG_STREAM_SINGLE_ISSUER |
                 LDG_STREAM_SHARED)) ||
      ((flags & LDG_STREAM_SINGLE_ISSUER) && (flags & LDG_STREAM_SHARED)) ||
      ((flags & LDG_STREAM_NONBLOCKING) && !has_drain))
    return MDL_BIT(LDG_EINVAL);
  return MDL_BIT(LDG_OK);
}

int mdl_stream_add(mdl *m, uint64_t id, int device, bool nonblocking) {
  GROW(m->s, m->n_s, m->cap_s);
  mdl_stream *st = &m->s[m->n_s];
  memset(st, 0, sizeof *st);
  st->id = id;
  st->device = device;
  st->nonblocking = nonblocking;
  st->refs_test = 1;
  return (int)m->n_s++;
}

void mdl_ref(mdl *m, int s) { m->s[s].refs_test++; }

static void drop_check(mdl *m, int s) {
  mdl_stream *st = &m->s[s];
  if (st->refs_test == 0 && st->refs_snap == 0 && !st->destroyed)
    mdl_destroy(m, s);
}

void mdl_unref(mdl *m, int s) {
  m->s[s].refs_test--;
  drop_check(m, s);
}

unsigned mdl_expect_destroy(const mdl *m, int s) {
  if (!is_stream(m, s)) return MDL_BIT(LDG_EINVAL);
  if (m->s[s].destroyed) return MDL_BIT(LDG_EDESTROYED);
  return MDL_BIT(LDG_OK);
}

void mdl_destroy(mdl *m, int s) {
  release_closure(m, s, m->s[s].mark);
  m->s[s].destroyed = true;
}

void mdl_destroy_all(mdl *m) {
  for (size_t i = 0; i < m->n_s; i++)
    if (!m->s[i].destroyed) mdl_destroy(m, (int)i);
}

int mdl_check_live(const mdl *m, int s) {
  if (!is_stream(m, s)) return LDG_EINVAL;
  return m->s[s].destroyed ? LDG_EDESTROYED : LDG_OK;
}

/* ---- Recording ----------------------------------------------------------- */

int mdl_range_kind(ldg_range r) {
  if (r.bytes == 0) return 1;
  uintptr_t room = UINTPTR_MAX - r.addr; /* last byte may be addr + room */
  if (r.bytes - 1 > room) return 1;
  if (r.bytes - 1 == room) return 2;
  return 0;
}

unsigned mdl_expect_enqueue(const mdl *m, int s, const uint64_t *vec,
                            size_t n_vec, const ldg_range *ranges,
                            size_t n_ranges) {
  if (!is_stream(m, s)) return MDL_BIT(LDG_EINVAL);
  unsigned bad = 0;
  bool edge = false;
  if (vec == NULL && n_vec > 0) bad = MDL_BIT(LDG_EINVAL);
  if (ranges == NULL && n_ranges > 0) bad = MDL_BIT(LDG_EINVAL);
  if (ranges != NULL) {
    for (size_t i = 0; i < n_ranges; i++) {
      int k = mdl_range_kind(ranges[i]);
      if (k == 1) bad = MDL_BIT(LDG_EINVAL);
      if (k == 2) edge = true;
    }
  }
  if (m->s[s].destroyed) return bad | MDL_BIT(LDG_EDESTROYED) |
                                (edge ? MDL_BIT(LDG_EINVAL) : 0);
  if (bad) return bad;
  if (edge) return MDL_BIT(LDG_OK) | MDL_BIT(LDG_EINVAL);
  return MDL_BIT(LDG_OK);
}

static mdl_item *append_item(mdl *m, int s) {
  mdl_stream *st = &m->s[s];
  GROW(st->items, st->n_items, st->cap_items);
  mdl_item *it = &st->items[st->n_items++];
  memset(it, 0, sizeof *it);
  it->seq = ++st->mark;
  it->keep = -1;
  it->act_stream = -1;
  it->target = -1;
  return it;
}

ldg_seq mdl_enqueue(mdl *m, int s, int keep, int act_stream, ldg_seq act_upto,
                    const uint64_t *vec, size_t n_vec, const ldg_range *ranges,
                    size_t n_ranges) {
  if (n_vec > MDL_MAX_VEC || n_ranges > MDL_MAX_RANGE) {
    fprintf(stderr, "model: too many ids or ranges\n");
    abort();
  }
  mdl_item *it = append_item(m, s);
  it->keep = keep;
  it->act_stream = act_stream;
  it->act_upto = act_upto;
  it->n_vec = n_vec;
  if (n_vec) memcpy(it->vec, vec, n_vec * sizeof *vec);
  it->n_range = n_ranges;
  if (n_ranges) memcpy(it->range, ranges, n_ranges * sizeof *ranges);
  return it->seq;
}

unsigned mdl_expect_add_wait(const mdl *m, int b, int a, ldg_seq upto) {
  if (b == MDL_NULL || a == MDL_NULL) return MDL_BIT(LDG_EINVAL);
  unsigned e = 0;
  if (b == MDL_FOREIGN || a == MDL_FOREIGN) e |= MDL_BIT(LDG_EINVAL);
  if (a == MDL_FOREIGN ? upto > 0 : upto > m->s[a].mark)
    e |= MDL_BIT(LDG_EINVAL);
  if (b != MDL_FOREIGN && m->s[b].destroyed) e |= MDL_BIT(LDG_EDESTROYED);
  return e ? e : MDL_BIT(LDG_OK);
}

ldg_seq mdl_add_wait(mdl *m, int b, int a, ldg_seq upto) {
  mdl_item *it = append_item(m, b);
  it->is_wait = true;
  it->target = a;
  it->upto = upto;
  m->s[a].ever_wait_target = true;
  return it->seq;
}

unsigned mdl_expect_release(const mdl *m, int s, ldg_seq upto) {
  if (!is_stream(m, s)) return MDL_BIT(LDG_EINVAL);
  unsigned e = 0;
  if (upto > m->s[s].mark) e |= MDL_BIT(LDG_EINVAL);
  if (m->s[s].destroyed) e |= MDL_BIT(LDG_EDESTROYED);
  return e ? e : MDL_BIT(LDG_OK);
}

void mdl_release(mdl *m, int s, ldg_seq upto) { release_closure(m, s, upto); }

unsigned mdl_expect_release_all(const mdl *m, int s) {
  return mdl_expect_release(m, s, 0);
}

void mdl_release_all(mdl *m, int s) { release_closure(m, s, m->s[s].mark); }

/* ---- Device snapshots ---------------------------------------------------- */

unsigned mdl_expect_device_marks(bool l_null, bool out_null, int device) {
  if (l_null || out_null || device < 0) return MDL_BIT(LDG_EINVAL);
  return MDL_BIT(LDG_OK);
}

int mdl_device_marks(mdl *m, int device) {
  GROW(m->snap, m->n_snap, m->cap_snap);
  mdl_snap *sn = &m->snap[m->n_snap];
  memset(sn, 0, sizeof *sn);
  sn->open = true;
  sn->stream = xrealloc(NULL, (m->n_s + 1) * sizeof *sn->stream);
  sn->mark = xrealloc(NULL, (m->n_s + 1) * sizeof *sn->mark);
  for (size_t i = 0; i < m->n_s; i++) {
    mdl_stream *st = &m->s[i];
    if (st->destroyed || st->device != device) continue;
    sn->stream[sn->n] = (int)i;
    sn->mark[sn->n] = st->mark;
    sn->n++;
    st->refs_snap++;
  }
  return (int)m->n_snap++;
}

static void snap_drop(mdl *m, int snap) {
  mdl_snap *sn = &m->snap[snap];
  sn->open = false;
  for (size_t i = 0; i < sn->n; i++) {
    m->s[sn->stream[i]].refs_snap--;
    drop_check(m, sn->stream[i]);
  }
}

void mdl_release_marks(mdl *m, int snap) {
  mdl_snap *sn = &m->snap[snap];
  for (size_t i = 0; i < sn->n; i++)
    if (!m->s[sn->stream[i]].destroyed)
      release_closure(m, sn->stream[i], sn->mark[i]);
  snap_drop(m, snap);
}

void mdl_marks_discard(mdl *m, int snap) { snap_drop(m, snap); }

/* ---- Settle -------------------------------------------------------------- */

int mdl_settle(mdl *m, uint64_t vec, const bool *fails) {
  size_t n = mdl_nb_holding(m, vec, NULL, 0);
  int *h = xrealloc(NULL, (n + 1) * sizeof *h);
  mdl_nb_holding(m, vec, h, n);
  int rc = LDG_OK;
  for (size_t i = 0; i < n; i++) {
    if (fails[h[i]]) {
      rc = LDG_EDRAIN;
      continue;
    }
    release_closure(m, h[i], m->s[h[i]].mark);
  }
  free(h);
  return rc;
}

/* ---- Queries ------------------------------------------------------------- */

ldg_seq mdl_mark(const mdl *m, int s) { return m->s[s].mark; }

size_t mdl_pending(const mdl *m, int s) {
  size_t n = 0;
  for (size_t i = 0; i < m->s[s].n_items; i++)
    if (!m->s[s].items[i].is_wait) n++;
  return n;
}

size_t mdl_pending_total(const mdl *m) {
  size_t n = 0;
  for (size_t i = 0; i < m->n_s; i++) n += mdl_pending(m, (int)i);
  return n;
}

static bool item_names(const mdl_item *it, uint64_t vec) {
  if (it->is_wait) return false;
  for (size_t j = 0; j < it->n_vec; j++)
    if (it->vec[j] == vec) return true;
  return false;
}

static bool stream_names(const mdl_stream *st, uint64_t vec) {
  if (st->destroyed) return false;
  for (size_t i = 0; i < st->n_items; i++)
    if (item_names(&st->items[i], vec)) return true;
  return false;
}

bool mdl_holds_vector(const mdl *m, uint64_t vec) {
  for (size_t i = 0; i < m->n_s; i++)
    if (stream_names(&m->s[i], vec)) return true;
  return false;
}

/* Half-open [a, a+n) and [p, p+q) overlap, compared by their last bytes so
 * that nothing overflows (both n, q >= 1 and neither wraps). */
static bool overlaps(uintptr_t a, size_t n, uintptr_t p, size_t q) {
  uintptr_t a_last = a + (n - 1), p_last = p + (q - 1);
  return a <= p_last && p <= a_last;
}

bool mdl_holds_range(const mdl *m, uintptr_t addr, size_t bytes) {
  if (bytes == 0) return false;
  for (size_t i = 0; i < m->n_s; i++) {
    const mdl_stream *st = &m->s[i];
    if (st->destroyed) continue;
    for (size_t k = 0; k < st->n_items; k++) {
      const mdl_item *it = &st->items[k];
      if (it->is_wait) continue;
      for (size_t j = 0; j < it->n_range; j++)
        if (overlaps(it->range[j].addr, it->range[j].bytes, addr, bytes))
          return true;
    }
  }
  return false;
}

size_t mdl_nb_holding(const mdl *m, uint64_t vec, int *out, size_t cap) {
  size_t n = 0;
  for (size_t i = 0; i < m->n_s; i++) {
    const mdl_stream *st = &m->s[i];
    if (!st->nonblocking || !stream_names(st, vec)) continue;
    if (n < cap) out[n] = (int)i;
    n++;
  }
  return n;
}

bool mdl_has_nb(const mdl *m) {
  for (size_t i = 0; i < m->n_s; i++)
    if (m->s[i].nonblocking && !m->s[i].destroyed) return true;
  return false;
}
