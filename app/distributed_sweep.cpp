#include "app/distributed_sweep.hpp"

#include <cstdint>
#include <utility>

#include "io/point_codec.hpp"

namespace gratingsim::app {
namespace {

// Message payloads, through io/point_codec.hpp's byte primitives: a unit is its point indices; a
// solved unit its points with their results, then the warnings.

std::vector<std::byte> encode_unit(const Unit& unit) {
  std::vector<std::byte> bytes;
  io::put_vector(unit, bytes);
  return bytes;
}

Unit decode_unit(std::span<const std::byte> bytes) {
  std::size_t offset = 0;
  return io::ByteReader(bytes, offset).vector<std::size_t>();
}

std::vector<std::byte> encode_solved(const Solved& s) {
  std::vector<std::byte> bytes;
  io::put_vector(s.points, bytes);
  for (const io::PointResult& result : s.results) io::encode_point(result, bytes);
  io::put_value(std::uint64_t(s.warnings.size()), bytes);
  for (const std::string& w : s.warnings) io::put_vector(std::span<const char>(w), bytes);
  return bytes;
}

Solved decode_solved(std::span<const std::byte> bytes) {
  Solved s;
  std::size_t offset = 0;
  io::ByteReader in(bytes, offset);
  s.points = in.vector<std::size_t>();
  for (std::size_t j = 0; j < s.points.size(); ++j) s.results.push_back(io::decode_point(bytes, offset));
  const auto warnings = in.value<std::uint64_t>();
  for (std::uint64_t k = 0; k < warnings; ++k) s.warnings.push_back(in.text());
  return s;
}

}  // namespace

RankWorkers::~RankWorkers() {
  try {
    while (running_ > 0) {
      const Message m = ranks_.receive();
      if (m.tag == Tag::ready || m.tag == Tag::result) ranks_.send(m.source, Tag::stop, {});
      if (m.tag == Tag::ready || m.tag == Tag::result || m.tag == Tag::failed) --running_;  // failed: it has stopped
    }
  } catch (...) {  // no throw from a destructor; the launch then ends as mpirun ends it
  }
}

void RankWorkers::hand_out(UnitQueue& queue, int to) {
  if (std::optional<Unit> unit = queue.next()) {
    const std::vector<std::byte> bytes = encode_unit(*unit);
    assigned_[to] = std::move(*unit);
    ranks_.send(to, Tag::work, bytes);
  } else {
    assigned_.erase(to);
    ranks_.send(to, Tag::stop, {});
    --running_;
  }
}

// Every other rank gets its first unit before rank 0's own thread starts taking units, so that none
// waits while the local thread takes the head of the queue. (The ranks have just met in the
// collectives of the set-up: their ready messages come at once.)
void RankWorkers::start(UnitQueue& queue) {
  for (int waiting = running_; waiting > 0; --waiting) {
    const Message m = ranks_.receive();
    GS_EXPECTS(m.tag == Tag::ready, "unexpected message (tag " + std::to_string(int(m.tag)) + ") from rank " +
                                     std::to_string(m.source) + " before its first unit");
    hand_out(queue, m.source);
  }
  if (fail_after_start_) throw Error("injected failure on rank 0 (--fail-root-mid-sweep)");
}

bool RankWorkers::poll(UnitQueue& queue, const std::function<void(int, Solved)>& accept) {
  bool arrived = false;
  while (std::optional<Message> m = ranks_.poll()) {
    arrived = true;
    switch (m->tag) {
      case Tag::result:
        accept(m->source, decode_solved(m->bytes));
        hand_out(queue, m->source);
        break;
      case Tag::failed: {  // the rank has stopped
        Solved s;
        s.points = assigned_[m->source];
        s.failure = std::string(reinterpret_cast<const char*>(m->bytes.data()), m->bytes.size());
        accept(m->source, std::move(s));
        assigned_.erase(m->source);
        --running_;
        break;
      }
      default:
        throw Error("unexpected message (tag " + std::to_string(int(m->tag)) + ") from rank " +
                    std::to_string(m->source));
    }
  }
  return arrived;
}

void serve_sweep(Ranks& ranks, const io::Problem& problem, const WorkerOptions& options) {
  ranks.send(0, Tag::ready, {});
  for (;;) {
    const Message m = ranks.receive();
    if (m.tag == Tag::stop) return;
    GS_EXPECTS(m.tag == Tag::work, "unexpected message (tag " + std::to_string(int(m.tag)) + ") from rank 0");
    const Solved s = solve_unit(problem, decode_unit(m.bytes), ranks.rank(), options);
    if (!s.failure.empty()) {
      ranks.send(0, Tag::failed, std::as_bytes(std::span(s.failure)));
      return;
    }
    ranks.send(0, Tag::result, encode_solved(s));
  }
}

}  // namespace gratingsim::app
