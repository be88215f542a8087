/* Draining the rings: every complete record is copied out of the per-cpu rings, then the
 * records of one drain are processed in time order across the rings (a thread's FORK on
 * one cpu must come before its samples on another; a mapping before the samples in it).
 * Ties keep the order of copying. */
#include "nmp_collector.h"

#include <stdlib.h>

/* Time of a record: samples carry it after IDENTIFIER, IP and TID; side-band records in
 * the sample_id trailer (sample_id_all), located from the trailing IDENTIFIER.  Layouts:
 * Linux include/uapi/linux/perf_event.h, enum perf_event_type. */
static uint64_t record_time(const struct nmp_collector *c, const uint8_t *rec, uint32_t len,
                            uint16_t type)
{
    const uint8_t *body = rec + sizeof(struct perf_event_header);
    size_t blen = len - sizeof(struct perf_event_header);
    if (blen < 8)
        return 0;
    uint64_t id = nmp_rd64(type == PERF_RECORD_SAMPLE ? body : body + blen - 8);
    const struct nmp_ev *e = nmp_ev_of(&c->ev, id);
    if (!e)
        return 0;
    uint64_t st = e->attr.sample_type;
    if (type == PERF_RECORD_SAMPLE) {
        size_t off = 8 + ((st & PERF_SAMPLE_IP) ? 8 : 0) + ((st & PERF_SAMPLE_TID) ? 8 : 0);
        return off + 8 <= blen ? nmp_rd64(body + off) : 0;
    }
    /* struct sample_id: the fields of these bits, 8 bytes each, in this order */
    static const uint64_t trailer_bits[] = {PERF_SAMPLE_TID, PERF_SAMPLE_TIME, PERF_SAMPLE_ID,
                                            PERF_SAMPLE_STREAM_ID, PERF_SAMPLE_CPU,
                                            PERF_SAMPLE_IDENTIFIER};
    size_t trailer = 0;
    for (size_t i = 0; i < sizeof trailer_bits / sizeof *trailer_bits; i++)
        if (st & trailer_bits[i])
            trailer += 8;
    size_t toff = blen - trailer + ((st & PERF_SAMPLE_TID) ? 8 : 0);
    return trailer <= blen && (st & PERF_SAMPLE_TIME) ? nmp_rd64(body + toff) : 0;
}

static int cmp_rec(const void *a, const void *b)
{
    const struct nmp_rec *x = a, *y = b;
    if (x->time != y->time)
        return x->time < y->time ? -1 : 1;
    return x->seq < y->seq ? -1 : x->seq > y->seq;
}

/* Copies the complete records of one ring to the stage and frees their space. */
static void drain_ring(struct nmp_collector *c, struct nmp_ring *r)
{
    struct nmp_drain *d = &c->drain;
    uint64_t head = __atomic_load_n(&r->meta->data_head, __ATOMIC_ACQUIRE);
    uint64_t tail = r->meta->data_tail;
    while (tail + sizeof(struct perf_event_header) <= head) {
        struct perf_event_header h;
        size_t off = (size_t)(tail % r->data_size);
        uint8_t hb[sizeof h]; /* the header itself may wrap */
        for (size_t k = 0; k < sizeof h; k++)
            hb[k] = r->data[(off + k) % r->data_size];
        memcpy(&h, hb, sizeof h);
        if (h.size < sizeof h || tail + h.size > head)
            break;
        if (NMP_GROW(d->stage, d->stage_cap, d->stage_len + h.size, 1 << 20) != 0 ||
            NMP_GROW(d->recs, d->reccap, d->nrecs + 1, 4096) != 0)
            break;
        uint8_t *dst = d->stage + d->stage_len;
        size_t first = r->data_size - off < h.size ? r->data_size - off : h.size;
        memcpy(dst, r->data + off, first);
        memcpy(dst + first, r->data, h.size - first);
        d->recs[d->nrecs++] = (struct nmp_rec){.time = record_time(c, dst, h.size, h.type),
                                               .seq = d->seq++, .off = d->stage_len,
                                               .len = h.size, .type = h.type, .misc = h.misc};
        d->stage_len += h.size;
        tail += h.size;
    }
    __atomic_store_n(&r->meta->data_tail, tail, __ATOMIC_RELEASE);
}

void nmp_drain(struct nmp_collector *c)
{
    struct nmp_drain *d = &c->drain;
    d->stage_len = 0;
    d->nrecs = 0;
    for (size_t i = 0; i < c->ev.nring; i++)
        drain_ring(c, &c->ev.rings[i]);
    if (!d->nrecs)
        return;
    qsort(d->recs, d->nrecs, sizeof *d->recs, cmp_rec);
    for (size_t i = 0; i < d->nrecs; i++)
        nmp_record(c, d->stage + d->recs[i].off, d->recs[i].len, d->recs[i].time);
}

void nmp_drain_free(struct nmp_drain *d)
{
    free(d->stage);
    free(d->recs);
}
