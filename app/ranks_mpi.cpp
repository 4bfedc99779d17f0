// Ranks over MPI (the C API; OpenMPI in Debian). The only file that includes mpi.h.
#include <mpi.h>

#include <algorithm>
#include <climits>
#include <exception>

#include "app/ranks.hpp"

namespace gratingsim::app {
namespace {

/// Throws Error naming the MPI call when it did not succeed. (MPI's default handler,
/// MPI_ERRORS_ARE_FATAL, aborts first on most errors; this catches the rest.)
void check(int status, const char* call) {
  if (status == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  MPI_Error_string(status, text, &length);
  throw Error(std::string(call) + " failed: " + std::string(text, std::size_t(length)));
}

int byte_count(std::size_t n) {
  if (n > std::size_t(INT_MAX))
    throw Error("an MPI message of " + std::to_string(n) + " bytes exceeds MPI's limit of " + std::to_string(INT_MAX));
  return int(n);
}

class MpiRanks final : public Ranks {
 public:
  MpiRanks() {
    int provided = 0;
    check(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided), "MPI_Init_thread");
    if (provided < MPI_THREAD_FUNNELED) {
      MPI_Finalize();
      throw Unsupported("the MPI library cannot run a rank with several threads (MPI_THREAD_FUNNELED)");
    }
    unwinding_at_start_ = std::uncaught_exceptions();
    MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
    MPI_Comm_size(MPI_COMM_WORLD, &size_);
    check(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank_, MPI_INFO_NULL, &local_),
          "MPI_Comm_split_type");
    MPI_Comm_rank(local_, &local_rank_);
    MPI_Comm_size(local_, &local_size_);
    char name[MPI_MAX_PROCESSOR_NAME];
    int length = 0;
    MPI_Get_processor_name(name, &length);
    host_.assign(name, std::size_t(length));
  }

  ~MpiRanks() override {
    if (std::uncaught_exceptions() > unwinding_at_start_ && !agreed_) {
      MPI_Abort(MPI_COMM_WORLD, 1);  // leaving alone: the other ranks would wait for this one forever
    }
    MPI_Comm_free(&local_);
    MPI_Finalize();
  }

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  int local_rank() const override { return local_rank_; }
  int local_size() const override { return local_size_; }
  std::string host() const override { return host_; }

  std::string broadcast(const std::string& value) override {
    unsigned long long length = value.size();
    check(MPI_Bcast(&length, 1, MPI_UNSIGNED_LONG_LONG, 0, MPI_COMM_WORLD), "MPI_Bcast");
    std::string out = rank_ == 0 ? value : std::string(length, '\0');
    check(MPI_Bcast(out.data(), byte_count(length), MPI_CHAR, 0, MPI_COMM_WORLD), "MPI_Bcast");
    return out;
  }

  std::vector<std::string> gather(const std::string& value) override {
    const int length = byte_count(value.size());
    std::vector<int> lengths(rank_ == 0 ? std::size_t(size_) : 0), offsets(lengths.size());
    check(MPI_Gather(&length, 1, MPI_INT, lengths.data(), 1, MPI_INT, 0, MPI_COMM_WORLD), "MPI_Gather");
    std::size_t total = 0;
    for (std::size_t r = 0; r < lengths.size(); ++r) {
      offsets[r] = byte_count(total);
      total += std::size_t(lengths[r]);
    }
    std::string all(total, '\0');
    check(MPI_Gatherv(value.data(), length, MPI_CHAR, all.data(), lengths.data(), offsets.data(), MPI_CHAR, 0,
                      MPI_COMM_WORLD),
          "MPI_Gatherv");
    std::vector<std::string> values;
    for (std::size_t r = 0; r < lengths.size(); ++r)
      values.push_back(all.substr(std::size_t(offsets[r]), std::size_t(lengths[r])));
    return values;
  }

  void send(int to, Tag tag, std::span<const std::byte> bytes) override {
    check(MPI_Send(bytes.data(), byte_count(bytes.size()), MPI_BYTE, to, int(tag), MPI_COMM_WORLD), "MPI_Send");
  }

  Message receive() override {
    MPI_Status status;
    check(MPI_Probe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &status), "MPI_Probe");
    return take(status);
  }

  std::optional<Message> poll() override {
    int arrived = 0;
    MPI_Status status;
    check(MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &arrived, &status), "MPI_Iprobe");
    if (!arrived) return std::nullopt;
    return take(status);
  }

  void agree_to_stop() override { agreed_ = true; }

 private:
  /// Receives the probed message.
  Message take(const MPI_Status& probed) {
    int count = 0;
    check(MPI_Get_count(&probed, MPI_BYTE, &count), "MPI_Get_count");
    Message m;
    m.source = probed.MPI_SOURCE;
    m.tag = Tag(probed.MPI_TAG);
    m.bytes.resize(std::size_t(count));
    check(
        MPI_Recv(m.bytes.data(), count, MPI_BYTE, probed.MPI_SOURCE, probed.MPI_TAG, MPI_COMM_WORLD, MPI_STATUS_IGNORE),
        "MPI_Recv");
    return m;
  }

  int rank_ = 0, size_ = 1, local_rank_ = 0, local_size_ = 1;
  MPI_Comm local_ = MPI_COMM_NULL;
  std::string host_;
  int unwinding_at_start_ = 0;
  bool agreed_ = false;
};

}  // namespace

std::unique_ptr<Ranks> Ranks::join() { return std::make_unique<MpiRanks>(); }

std::optional<std::string> mpi_library() {
  char text[MPI_MAX_LIBRARY_VERSION_STRING] = {};
  int length = 0;
  if (MPI_Get_library_version(text, &length) != MPI_SUCCESS) return "unknown";
  std::string version(text, std::size_t(std::max(length, 0)));
  if (const auto end = version.find_first_of("\r\n,"); end != std::string::npos) version.resize(end);
  return version;
}

}  // namespace gratingsim::app
