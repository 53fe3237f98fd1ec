// volt/detail/intrusive_list.hpp: a doubly-linked list threaded through its
// elements, for waiter queues that must not allocate.
//
// An element derives from IntrusiveLink:
//
//   struct Waiter : IntrusiveLink { ... };
//   IntrusiveList<Waiter> queue;
//
// Guarantees: every operation is O(1) and allocates nothing; an element is in
// at most one list at a time (IntrusiveLink::linked says whether it is in
// one, so removal of a non-member is detectable rather than corrupting).
// Not synchronised: the owner (a primitive's mutex) guards the list and the
// links of its elements. Order: push_back appends (newest), front() is the
// oldest, so push_back + pop_front is FIFO.
#pragma once

#include <cstddef>

namespace volt::detail {

struct IntrusiveLink {
  IntrusiveLink* prev = nullptr;
  IntrusiveLink* next = nullptr;
  bool linked = false;
};

template <class T>
class IntrusiveList {
 public:
  IntrusiveList() noexcept = default;
  IntrusiveList(const IntrusiveList&) = delete;
  IntrusiveList& operator=(const IntrusiveList&) = delete;

  bool empty() const noexcept { return head_ == nullptr; }
  std::size_t size() const noexcept { return size_; }
  T* front() const noexcept { return head_ ? owner(head_) : nullptr; }
  T* back() const noexcept { return tail_ ? owner(tail_) : nullptr; }
  // The element after `element` (a member), or nullptr: for walks that may
  // remove the element they stand on (read next first).
  static T* next(T* element) noexcept {
    IntrusiveLink* link = element;
    return link->next ? owner(link->next) : nullptr;
  }

  void push_back(T* element) noexcept {
    IntrusiveLink* link = element;
    link->prev = tail_;
    link->next = nullptr;
    if (tail_) {
      tail_->next = link;
    } else {
      head_ = link;
    }
    tail_ = link;
    link->linked = true;
    ++size_;
  }

  void push_front(T* element) noexcept {
    IntrusiveLink* link = element;
    link->prev = nullptr;
    link->next = head_;
    if (head_) {
      head_->prev = link;
    } else {
      tail_ = link;
    }
    head_ = link;
    link->linked = true;
    ++size_;
  }

  T* pop_front() noexcept {
    if (!head_) return nullptr;
    T* element = owner(head_);
    remove(element);
    return element;
  }

  // Unlinks `element` if it is in this list. Returns whether it was.
  bool remove(T* element) noexcept {
    IntrusiveLink* link = element;
    if (!link->linked) return false;
    if (link->prev) {
      link->prev->next = link->next;
    } else {
      head_ = link->next;
    }
    if (link->next) {
      link->next->prev = link->prev;
    } else {
      tail_ = link->prev;
    }
    link->prev = link->next = nullptr;
    link->linked = false;
    --size_;
    return true;
  }

 private:
  static T* owner(IntrusiveLink* link) noexcept { return static_cast<T*>(link); }

  IntrusiveLink* head_ = nullptr;
  IntrusiveLink* tail_ = nullptr;
  std::size_t size_ = 0;
};

}  // namespace volt::detail
