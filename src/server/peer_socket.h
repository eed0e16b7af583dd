// Whether the client of a connected socket is still there, asked by a handler that has nothing to write yet (a
// non-streaming request waiting for its answer). docs/SERVER.md, "Hang-ups".
#pragma once

namespace dg::server {

// Whether the client of connected socket `fd` is gone, asked without blocking and without reading: the connection
// was reset or closed, or the client ended its input (close() and shutdown(SHUT_WR) look the same here) with no
// bytes left unread. Bytes it sent ahead (a keep-alive client's next request) mean it is there.
bool socket_peer_gone(int fd);

}  // namespace dg::server
