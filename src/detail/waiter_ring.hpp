// A circular doubly-linked ring of waiter links around a sentinel, for the
// primitives whose waiters keep the ring's order across a "move everyone out,
// then wake in batches" step (Notify::notify_waiters, broadcast's send).
// `Link` is any struct with `Link* prev, *next`; every call happens under the
// owning primitive's lock. A sentinel's empty ring points at itself.
#pragma once

#include <type_traits>

namespace volt::detail {

template <class Link>
bool ring_empty(const Link& sentinel) noexcept {
  return sentinel.next == &sentinel;
}

template <class Link>
void ring_push_back(Link& sentinel, std::type_identity_t<Link>* node) noexcept {
  node->prev = sentinel.prev;
  node->next = &sentinel;
  sentinel.prev->next = node;
  sentinel.prev = node;
}

template <class Link>
void ring_unlink(Link* node) noexcept {
  node->prev->next = node->next;
  node->next->prev = node->prev;
  node->prev = node->next = nullptr;
}

// Moves every node of `from` onto the empty ring `to`.
template <class Link>
void ring_move_all(Link& from, Link& to) noexcept {
  to.prev = to.next = &to;
  if (ring_empty(from)) return;
  to.next = from.next;
  to.prev = from.prev;
  to.next->prev = &to;
  to.prev->next = &to;
  from.prev = from.next = &from;
}

}  // namespace volt::detail
