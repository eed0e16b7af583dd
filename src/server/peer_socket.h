// The connected socket behind an HTTP request, and whether its client is still there. cpp-httplib 0.11 keeps the
// socket private, so it is found among this process's descriptors (/proc/self/fd, Linux) by its two ends. The
// client counts as gone exactly when httplib would no longer write it an answer (docs/SERVER.md, "Hang-ups").
#pragma once

#include <string>

namespace dg::server {

struct SocketEnds {
  std::string local_addr;   // numeric, as getnameinfo(NI_NUMERICHOST) writes it (httplib's Request does the same)
  int local_port = -1;
  std::string remote_addr;
  int remote_port = -1;
};

// The descriptor of this process's connected socket with these ends; -1 when there is none (or no /proc).
int socket_find(const SocketEnds& ends);

// Whether the client of connected socket `fd` is gone, asked without blocking and without reading: the connection
// was reset or closed, or the client ended its input (close() and shutdown(SHUT_WR) look the same here) with no
// bytes left unread. Bytes it sent ahead (a keep-alive client's next request) mean it is there. This is the test
// httplib 0.11.4 makes before it writes a response (detail::is_socket_alive in SocketStream::is_writable), so a
// client this calls gone would not get its answer anyway.
bool socket_peer_gone(int fd);

}  // namespace dg::server
