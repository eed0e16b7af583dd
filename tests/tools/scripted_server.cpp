// dg_scripted_server MODEL_DIR [API_KEY]: the server of `diffgemma serve` with scripted replies on the embedded
// model (support/scripted_denoiser.h), for client tests that need known answers: tool calls, reasoning, stop
// strings. Listens on a free loopback port, printed as `listening on http://127.0.0.1:PORT`; SIGTERM stops it.
#include <pthread.h>

#include <csignal>
#include <cstdio>
#include <thread>

#include "server/server.h"
#include "support/scripted_denoiser.h"

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: dg_scripted_server MODEL_DIR [API_KEY]\n");
    return 2;
  }
  std::signal(SIGPIPE, SIG_IGN);
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);

  dg::EngineOptions eo;
  eo.model_dir = argv[1];
  const auto engine = dg::EngineCore::open(eo);
  dg::server::ServerOptions so;
  so.port = 0;
  so.context = eo.context - engine->config().canvas;
  if (argc > 2) so.api_keys = {argv[2]};
  dg::server::Server srv(*engine, so, nullptr, dg::test::scripted_denoisers(engine->tokenizer()));
  std::fprintf(stderr, "listening on http://127.0.0.1:%d\n", srv.bind());
  std::fflush(stderr);
  std::thread([&srv, stop_signals] {
    int sig = 0;
    sigwait(&stop_signals, &sig);
    srv.stop();
  }).detach();
  srv.run();
  return 0;
}
