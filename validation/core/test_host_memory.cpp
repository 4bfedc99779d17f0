// core/host_memory.hpp: control-group memory limits read from v1 and v2 hierarchies laid out in a temporary
// directory as the kernel lays them out (the hierarchy's root as a container sees it, the process's own group from
// /proc/self/cgroup), the smallest limit winning; "max" and absent files mean no limit.
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <random>
#include <string>

#include "core/host_memory.hpp"
#include "validation/support/catch.hpp"
#include "validation/support/scratch_directory.hpp"

using namespace gratingsim;
namespace fs = std::filesystem;

namespace {

/// A scratch directory standing for /sys/fs/cgroup: `write` lays a file out below it as the kernel does.
struct FakeRoot {
  test::ScratchDirectory directory{"cgroup"};
  void write(const std::string& relative, const std::string& text) const {
    const fs::path file = directory / relative;
    fs::create_directories(file.parent_path());
    std::ofstream(file) << text;
  }
  [[nodiscard]] std::string root() const { return directory.path().string(); }
};

std::size_t random_bytes() { return (std::size_t(1) << 30) + std::size_t(std::random_device{}()) * 4096; }

}  // namespace

TEST_CASE("memory.max and memory.limit_in_bytes texts parse to bytes, or to no limit", "[core][host_memory]") {
  const std::size_t bytes = random_bytes();
  CHECK(parse_memory_limit(std::to_string(bytes) + "\n") == bytes);
  CHECK(parse_memory_limit(std::to_string(bytes)) == bytes);
  CHECK_FALSE(parse_memory_limit("max\n").has_value());
  CHECK_FALSE(parse_memory_limit("").has_value());
  CHECK_FALSE(parse_memory_limit("12abc\n").has_value());
  CHECK_FALSE(parse_memory_limit("-5\n").has_value());
}

TEST_CASE("a cgroup v2 limit is read at the root and at the process's own group, the smaller winning",
          "[core][host_memory]") {
  const FakeRoot fake;
  CHECK_FALSE(control_group_memory_limit(fake.root(), "0::/\n").has_value());  // no files: no limit
  fake.write("memory.max", "max\n");
  CHECK_FALSE(control_group_memory_limit(fake.root(), "0::/\n").has_value());
  const std::size_t job = random_bytes();
  fake.write("system.slice/slurmstepd.scope/job_42/memory.max", std::to_string(job) + "\n");
  CHECK(control_group_memory_limit(fake.root(), "0::/system.slice/slurmstepd.scope/job_42\n") == job);
  fake.write("memory.max", std::to_string(job / 2) + "\n");  // a container's own limit, lower
  CHECK(control_group_memory_limit(fake.root(), "0::/system.slice/slurmstepd.scope/job_42\n") == job / 2);
}

TEST_CASE("a cgroup v1 memory controller's limit is read, alone or among other controllers", "[core][host_memory]") {
  const FakeRoot fake;
  fake.write("memory/memory.limit_in_bytes", "9223372036854771712\n");  // v1's "no limit": larger than any memory
  const std::size_t job = random_bytes();
  fake.write("memory/slurm/uid_1000/job_7/memory.limit_in_bytes", std::to_string(job) + "\n");
  const std::string self = "12:pids:/slurm/uid_1000/job_7\n4:memory:/slurm/uid_1000/job_7\n0::/\n";
  CHECK(control_group_memory_limit(fake.root(), self) == job);
  CHECK(control_group_memory_limit(fake.root(), "5:cpu,memory,cpuacct:/slurm/uid_1000/job_7\n") == job);
  CHECK(control_group_memory_limit(fake.root(), "3:cpu:/slurm/uid_1000/job_7\n") == std::size_t(9223372036854771712ull));
}

TEST_CASE("the host memory is positive and at most the physical memory", "[core][host_memory]") {
  const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
  REQUIRE(pages > 0);
  const std::size_t physical = std::size_t(pages) * std::size_t(page);
  CHECK(host_memory_bytes() > 0);
  CHECK(host_memory_bytes() <= physical);
  CHECK(host_memory_is_group_limit() == (host_memory_bytes() < physical));
}
