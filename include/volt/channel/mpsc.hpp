// volt/channel/mpsc.hpp: Tokio's `mpsc` names: the bounded channel
// (mpsc::channel, Sender, Receiver) and the unbounded one
// (mpsc::unbounded_channel, UnboundedSender, UnboundedReceiver).
//
//   auto [tx, rx] = volt::mpsc::channel<Job>(64);       // bounded: send() waits for room
//   volt::spawn(producer(tx));                           // senders are copied (cloned)
//   volt::SendResult<Job> sent = co_await tx.send(std::move(job));
//   while (std::optional<Job> job = co_await rx.recv()) run(*job);  // nullopt: closed, drained
//
//   auto [utx, urx] = volt::mpsc::unbounded_channel<Job>();  // send() never waits
//
// Guarantees:
//  - mpsc::channel<T>(cap), mpsc::Sender<T>, mpsc::Receiver<T> and
//    mpsc::kMaxCapacity are the bounded multi-producer multi-consumer
//    channel of volt/channel/mpmc.hpp under other names (aliases, not a
//    second implementation): an mpsc::Sender<T> is an mpmc::Sender<T>. All
//    of mpmc.hpp's contract holds (waiting senders woken oldest first with
//    bounded barging, where Tokio's are strictly FIFO; cancel-safe
//    send/recv, no allocation to wait, capacity in [1, kMaxCapacity] or
//    volt::Error(errc::invalid_argument)).
//  - Unlike Tokio's, the Receiver can be copied: copies are more receivers of
//    the same channel, each value going to one of them. Not copying it gives
//    Tokio's single consumer. Tokio's blocking_send / blocking_recv are
//    send_blocking / recv_blocking; its Result<(), SendError<T>> is a
//    SendResult<T> (errc::closed or errc::full, the value handed back).
//    Its two-phase send is here too: mpsc::Permit / mpsc::PermitIterator
//    (Sender::reserve, try_reserve, reserve_many; see mpmc.hpp).
//  - The unbounded channel (volt/channel/unbounded.hpp, included) keeps its
//    own types, UnboundedSender / UnboundedReceiver, as in Tokio; its receiver
//    is single-consumer and cannot be copied.
//  - volt::sync::mpsc names this namespace too (Tokio's tokio::sync::mpsc).
#pragma once

#include <cstddef>

#include "volt/channel/mpmc.hpp"
#include "volt/channel/unbounded.hpp"

namespace volt::mpsc {

template <class T>
using Sender = mpmc::Sender<T>;
template <class T>
using Receiver = mpmc::Receiver<T>;
template <class T>
using Permit = mpmc::Permit<T>;
template <class T>
using PermitIterator = mpmc::PermitIterator<T>;
using mpmc::channel;
using mpmc::kMaxCapacity;

}  // namespace volt::mpsc

namespace volt::sync {
namespace mpsc = volt::mpsc;
}  // namespace volt::sync
