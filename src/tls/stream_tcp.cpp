// tls::Stream over TCP, compiled once here: programs that use it include
// stream.hpp but do not instantiate its coroutines themselves.
#include "volt/tls/stream.hpp"

namespace volt::tls {

template class Stream<net::TcpStream>;
template Task<Expected<Stream<net::TcpStream>>> connect(const Context&, net::TcpStream,
                                                        std::string_view);
template Task<Expected<Stream<net::TcpStream>>> accept(const Context&, net::TcpStream);

}  // namespace volt::tls
