#include "server/peer_socket.h"

#include <poll.h>
#include <sys/socket.h>

#include <cerrno>

namespace dg::server {

bool socket_peer_gone(int fd) {
  pollfd p{fd, POLLIN | POLLRDHUP, 0};
  if (::poll(&p, 1, 0) < 0) return false;  // EINTR: asked again next time
  if ((p.revents & (POLLERR | POLLHUP | POLLNVAL)) != 0) return true;  // reset, or closed both ways
  if ((p.revents & (POLLIN | POLLRDHUP)) == 0) return false;           // quiet: waiting for its answer
  char byte = 0;
  const ssize_t n = ::recv(fd, &byte, 1, MSG_PEEK | MSG_DONTWAIT);
  if (n > 0) return false;  // bytes sent ahead, left for the next read
  if (n == 0) return true;  // end of input
  return errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR;
}

}  // namespace dg::server
