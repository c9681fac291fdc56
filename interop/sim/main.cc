// petrel-netsim: a userspace UDP network simulator for the local interop runner (issue 7).
// The command line is Usage() in options.cc; the relay is Simulator.
#include <stdio.h>
#include <time.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "options.h"
#include "simulator.h"

namespace {

// Writes through a temporary file and rename(), so a reader polling for the file never sees it
// half written.
bool WriteFileAtomically(const std::string& path, const std::string& content) {
  const std::string tmp = absl::StrCat(path, ".tmp.", ::getpid());
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) return false;
    out << content;
    if (!out.flush()) return false;
  }
  return std::rename(tmp.c_str(), path.c_str()) == 0;
}

}  // namespace

int main(int argc, char** argv) {
  absl::StatusOr<petrel::netsim::SimOptions> options = petrel::netsim::ParseOptions(argc, argv);
  if (!options.ok()) {
    std::fprintf(stderr, "petrel-netsim: %s\n%s", std::string(options.status().message()).c_str(),
                 petrel::netsim::Usage());
    return 2;
  }
  if (options->help) {
    std::fputs(petrel::netsim::Usage(), stdout);
    return 0;
  }
  if (!options->seed_given) {
    timespec ts{};
    ::clock_gettime(CLOCK_REALTIME, &ts);
    options->seed =
        static_cast<uint64_t>(ts.tv_sec) * 1'000'000'000ull + static_cast<uint64_t>(ts.tv_nsec);
  }

  petrel::netsim::Simulator sim(*options);
  if (absl::Status s = sim.Init(); !s.ok()) {
    std::fprintf(stderr, "petrel-netsim: %s\n", std::string(s.message()).c_str());
    return 1;
  }
  std::fprintf(stderr, "netsim: seed %llu, relaying %s -> %s\n",
               static_cast<unsigned long long>(options->seed), options->listen.ToString().c_str(),
               options->server.ToString().c_str());
  std::printf("listening %u\n", sim.listen_port());
  std::fflush(stdout);
  if (!options->ready_file.empty() &&
      !WriteFileAtomically(options->ready_file, absl::StrCat(sim.listen_port(), "\n"))) {
    std::fprintf(stderr, "petrel-netsim: cannot write %s\n", options->ready_file.c_str());
    return 1;
  }

  const absl::Status run = sim.Run();
  const std::string stats = sim.StatsJson();
  if (!options->stats_file.empty() && !WriteFileAtomically(options->stats_file, stats)) {
    std::fprintf(stderr, "petrel-netsim: cannot write %s\n", options->stats_file.c_str());
    return 1;
  }
  if (!run.ok()) {
    std::fprintf(stderr, "petrel-netsim: %s\n", std::string(run.message()).c_str());
    return 1;
  }
  return 0;
}
