"""The compiled search loop of `BM25` (numba; compiled on the first search, cached on disk).

A document's score is the sum over the query's terms of a precomputed contribution (bm25s's
score matrix: one column of increasing document numbers per term), added in float64 and rounded
to float32, as Lucene does. Documents are visited in corpus order, document at a time, with
Lucene's MaxScore pruning: once k documents are kept, the terms whose largest contributions add
up to no more than the k-th best score cannot lift a document on their own, so their postings are
not walked, only probed (by galloping search) for documents the other terms bring, and a document
is dropped as soon as the terms left cannot lift it past the k-th best. The bound is exact, so the
result is the exhaustive top k: best score first, equal scores in corpus order (a later document
never displaces an earlier one of the same score).
"""

from __future__ import annotations

import numba
import numpy as np


@numba.njit(nogil=True, cache=True)
def _worse(s1, d1, s2, d2):
    """Whether (score s1, doc d1) ranks below (s2, d2): lower score, or equal and later doc."""
    return s1 < s2 or (s1 == s2 and d1 > d2)


@numba.njit(nogil=True, cache=True)
def _offer(heap_s, heap_d, size, s, d):
    """Offer a document to a heap of at most ``len(heap_s)`` kept ones (root: the worst kept);
    returns the new size."""
    if size < len(heap_s):
        pos = size
        size += 1
        while pos > 0:
            parent = (pos - 1) >> 1
            if _worse(heap_s[parent], heap_d[parent], s, d):
                break
            heap_s[pos], heap_d[pos] = heap_s[parent], heap_d[parent]
            pos = parent
        heap_s[pos], heap_d[pos] = s, d
    elif _worse(heap_s[0], heap_d[0], s, d):
        pos = 0
        while True:
            child = 2 * pos + 1
            if child >= size:
                break
            right = child + 1
            if right < size and _worse(heap_s[right], heap_d[right], heap_s[child], heap_d[child]):
                child = right
            if _worse(s, d, heap_s[child], heap_d[child]):
                break
            heap_s[pos], heap_d[pos] = heap_s[child], heap_d[child]
            pos = child
        heap_s[pos], heap_d[pos] = s, d
    return size


@numba.njit(nogil=True, cache=True)
def _advance(indices, lo, hi, d):
    """The first position in ``lo:hi`` whose document is >= d (``hi`` if none): galloping, then
    binary search, so a short jump costs little."""
    if lo >= hi or indices[lo] >= d:
        return lo
    step, below = 1, lo  # indices[below] < d
    while below + step < hi and indices[below + step] < d:
        below += step
        step *= 2
    right = min(below + step, hi)
    return below + 1 + np.searchsorted(indices[below + 1 : right], d)


@numba.njit(nogil=True, cache=True)
def search_range(data, indices, indptr, upper, prune, flat, pointers, offsets, start, stop,
                 found, scores, counts):  # fmt: skip
    """Top ``found.shape[1]`` documents of queries ``start:stop`` (their term ids are
    ``flat[pointers[q]:pointers[q + 1]]``, a term twice counts twice) into ``found``, ``scores``
    and ``counts``. ``upper``: each term's largest contribution; ``prune``: whether MaxScore may
    skip (contributions are never negative and the query has no constant ``offsets[q]``)."""
    k = found.shape[1]
    for q in range(start, stop):
        terms = flat[pointers[q] : pointers[q + 1]]
        terms = terms[np.argsort(upper[terms], kind="mergesort")]  # smallest bound first
        m = len(terms)
        below = np.zeros(m + 1)  # below[j]: the most that terms[:j] can add
        pos, end = np.empty(m, np.int64), np.empty(m, np.int64)
        for j in range(m):
            below[j + 1] = below[j] + upper[terms[j]]
            pos[j], end[j] = indptr[terms[j]], indptr[terms[j] + 1]
        heap_s, heap_d, size = scores[q], found[q], 0
        can_prune = prune and offsets[q] == 0
        theta = np.float32(-np.inf)  # the k-th best score once k are kept
        lazy = 0  # terms[:lazy] are only probed: together they cannot beat theta
        while True:
            d = -1
            for j in range(lazy, m):
                if pos[j] < end[j] and (d < 0 or indices[pos[j]] < d):
                    d = indices[pos[j]]
            if d < 0:
                break
            s = 0.0
            for j in range(lazy, m):
                if pos[j] < end[j] and indices[pos[j]] == d:
                    s += data[pos[j]]
                    pos[j] += 1
            j = lazy - 1
            while j >= 0:
                if np.float32(s + below[j + 1]) <= theta:
                    break  # cannot beat the k-th best (a tie loses: d comes after every kept doc)
                pos[j] = _advance(indices, pos[j], end[j], d)
                if pos[j] < end[j] and indices[pos[j]] == d:
                    s += data[pos[j]]
                j -= 1
            if j >= 0:
                continue
            score = np.float32(np.float32(s) + offsets[q])
            if score <= 0 or score <= theta:
                continue
            size = _offer(heap_s, heap_d, size, score, d)
            if size == k and can_prune:
                theta = heap_s[0]
                while lazy < m and np.float32(below[lazy + 1]) <= theta:
                    lazy += 1
        counts[q] = size
        for j in range(1, size):  # insertion sort, best first (k is small)
            s, d, i = heap_s[j], heap_d[j], j
            while i > 0 and _worse(heap_s[i - 1], heap_d[i - 1], s, d):
                heap_s[i], heap_d[i] = heap_s[i - 1], heap_d[i - 1]
                i -= 1
            heap_s[i], heap_d[i] = s, d
