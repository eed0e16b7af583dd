#include "server/peer_socket.h"

#include <dirent.h>
#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstdlib>

namespace dg::server {
namespace {

using NameFn = int (*)(int, sockaddr*, socklen_t*);

// One end of `fd` (getsockname or getpeername) equals addr:port.
bool end_is(int fd, NameFn name, const std::string& addr, int port) {
  sockaddr_storage ss{};
  socklen_t len = sizeof(ss);
  if (name(fd, reinterpret_cast<sockaddr*>(&ss), &len) != 0) return false;
  if (ss.ss_family != AF_INET && ss.ss_family != AF_INET6) return false;
  char host[NI_MAXHOST], serv[NI_MAXSERV];
  if (getnameinfo(reinterpret_cast<sockaddr*>(&ss), len, host, sizeof(host), serv, sizeof(serv),
                  NI_NUMERICHOST | NI_NUMERICSERV) != 0)
    return false;
  return addr == host && port == std::atoi(serv);
}

}  // namespace

int socket_find(const SocketEnds& ends) {
  DIR* dir = ::opendir("/proc/self/fd");
  if (dir == nullptr) return -1;
  int found = -1;
  while (const dirent* d = ::readdir(dir)) {
    char* end = nullptr;
    const int fd = static_cast<int>(std::strtol(d->d_name, &end, 10));
    if (end == d->d_name || *end != '\0' || fd == ::dirfd(dir)) continue;  // ".", "..", the listing itself
    struct stat st{};
    if (::fstat(fd, &st) != 0 || !S_ISSOCK(st.st_mode)) continue;
    if (end_is(fd, ::getsockname, ends.local_addr, ends.local_port) &&
        end_is(fd, ::getpeername, ends.remote_addr, ends.remote_port)) {
      found = fd;
      break;
    }
  }
  ::closedir(dir);
  return found;
}

bool socket_peer_gone(int fd) {
  pollfd p{fd, POLLIN | POLLRDHUP, 0};
  if (::poll(&p, 1, 0) < 0) return false;  // EINTR: asked again next time
  if ((p.revents & (POLLERR | POLLHUP | POLLNVAL)) != 0) return true;  // reset, or closed both ways
  if ((p.revents & (POLLIN | POLLRDHUP)) == 0) return false;           // quiet: waiting for its answer
  char byte = 0;
  const ssize_t n = ::recv(fd, &byte, 1, MSG_PEEK | MSG_DONTWAIT);
  if (n > 0) return false;  // bytes sent ahead, left for httplib
  if (n == 0) return true;  // end of input
  return errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR;
}

}  // namespace dg::server
