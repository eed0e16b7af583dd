// socket_peer_gone on loopback TCP pairs: a quiet client is there, so is one that sent bytes ahead (even if it
// then ended its input), and the bytes stay unread; a client that closed, reset or half-closed is gone.
#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <thread>

#include "server/peer_socket.h"
#include "server_test_util.h"

namespace dg::test {
namespace peer_socket_test {

int local_port(int fd) {
  sockaddr_in a{};
  socklen_t len = sizeof(a);
  EXPECT_EQ(::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len), 0);
  return ntohs(a.sin_port);
}

// A connected loopback pair: `server` (accepted) and `client`.
struct Pair {
  Pair() {
    listener = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(::bind(listener, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
    EXPECT_EQ(::listen(listener, 4), 0);
    a.sin_port = htons(static_cast<uint16_t>(local_port(listener)));
    client = ::socket(AF_INET, SOCK_STREAM, 0);
    EXPECT_EQ(::connect(client, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
    server = ::accept(listener, nullptr, nullptr);
    EXPECT_GE(server, 0);
  }
  ~Pair() {
    for (int fd : {client, server, listener})
      if (fd >= 0) ::close(fd);
  }
  void close_client() {
    ::close(client);
    client = -1;
  }
  std::string client_reads() {  // what the client received so far, without waiting
    char buf[256];
    const ssize_t n = ::recv(client, buf, sizeof(buf), MSG_DONTWAIT);
    return n > 0 ? std::string(buf, static_cast<size_t>(n)) : std::string();
  }
  int listener = -1, client = -1, server = -1;
};

TEST(PeerSocket, AQuietOrPipeliningClientIsThere) {
  Pair p;
  EXPECT_FALSE(server::socket_peer_gone(p.server));
  ASSERT_EQ(::send(p.client, "GET / HTTP/1.1\r\n\r\n", 18, MSG_NOSIGNAL), 18);  // the next request, sent ahead
  ASSERT_EQ(::shutdown(p.client, SHUT_WR), 0);  // and nothing more
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_FALSE(server::socket_peer_gone(p.server)) << "unread bytes: a request to answer";
  char buf[32];
  EXPECT_EQ(::recv(p.server, buf, sizeof(buf), MSG_DONTWAIT), 18) << "the bytes stay unread";
  EXPECT_TRUE(server::socket_peer_gone(p.server)) << "read, only the end of input is left";
}

TEST(PeerSocket, AClosedClientIsGone) {
  Pair p;
  p.close_client();
  EXPECT_TRUE(eventually([&] { return server::socket_peer_gone(p.server); }, 10));
}

TEST(PeerSocket, AResetClientIsGone) {
  Pair p;
  const linger hard{1, 0};  // close() sends a reset
  ASSERT_EQ(::setsockopt(p.client, SOL_SOCKET, SO_LINGER, &hard, sizeof(hard)), 0);
  p.close_client();
  EXPECT_TRUE(eventually([&] { return server::socket_peer_gone(p.server); }, 10));
  EXPECT_LT(::send(p.server, "x", 1, MSG_NOSIGNAL), 0);
}

TEST(PeerSocket, AHalfClosedClientIsGone) {
  Pair p;
  ASSERT_EQ(::shutdown(p.client, SHUT_WR), 0);
  EXPECT_TRUE(eventually([&] { return server::socket_peer_gone(p.server); }, 10));
  EXPECT_EQ(::send(p.server, "x", 1, MSG_NOSIGNAL), 1) << "it could still read";
}

}  // namespace peer_socket_test
}  // namespace dg::test
