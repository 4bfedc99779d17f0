// The per-point datasets of a layout, and PointResult's equality, from the one table.
#include "io/result_fields.hpp"

#include <cstring>
#include <type_traits>

namespace gratingsim::io {

namespace {

// Every member of PointResult has its row: the members are counted as the most initialisers an
// aggregate accepts (each initialiser converts to any member type), and a member left out of the
// table would go missing from files, the codec and equality.
struct AnyMember {
  template <class T>
  operator T() const;  // never called: only its type is used
};
template <class T, class... Initializers>
constexpr std::size_t aggregate_members() {
  if constexpr (requires { T{Initializers{}..., AnyMember{}}; })
    return aggregate_members<T, Initializers..., AnyMember>();
  else
    return sizeof...(Initializers);
}
constexpr std::size_t rows_with_members() {
  std::size_t n = 0;
  for (const ResultField& f : result_fields) n += f.has_member();
  return n;
}
static_assert(std::is_aggregate_v<PointResult>);
static_assert(aggregate_members<PointResult>() == rows_with_members(),
              "every PointResult member needs its row in io/result_fields.hpp");

std::size_t extent(Dim d, const ResultLayout& l, std::size_t map) {
  switch (d.extent) {
    case Extent::fixed:
      return d.size;
    case Extent::polarizations:
      return std::size_t(l.polarizations());
    case Extent::orders:
      return l.orders_count();
    case Extent::slices:
      return l.slice_center_nm.size();
    case Extent::harmonics:
      return l.harmonics_count();
    case Extent::map_first:
      return l.maps.at(map).first_nm.size();
    case Extent::map_second:
      return l.maps.at(map).second_nm.size();
  }
  return 0;
}

bool present(Presence p, const ResultLayout& l) {
  switch (p) {
    case Presence::always:
      return true;
    case Presence::both_polarizations:
      return l.polarizations() == 2;
    case Presence::fields:
    case Presence::each_map:
      return l.fields;
    case Presence::accuracy:
      return l.accuracy.has_value();
    case Presence::accuracy_both_polarizations:
      return l.accuracy.has_value() && l.polarizations() == 2;
  }
  return false;
}

ResultDataset dataset(const ResultField& f, const ResultLayout& l, std::size_t map) {
  ResultDataset d{&f, map, std::string(f.path), {}};
  if (const auto at = d.path.find("map_K"); at != std::string::npos)
    d.path.replace(at, 5, "map_" + std::to_string(map));
  for (std::size_t i = 0; i < f.shape.rank; ++i) d.tail.push_back(extent(f.shape.dims[i], l, map));
  if (f.kind == ElementKind::c128) d.tail.push_back(2);
  return d;
}

}  // namespace

std::size_t ResultDataset::values() const {
  std::size_t n = 1;
  for (const std::size_t d : tail) n *= d;
  return field->kind == ElementKind::c128 ? n / 2 : n;
}

std::size_t stored_element_bytes(ElementKind kind) {
  switch (kind) {
    case ElementKind::f64:
    case ElementKind::c128:
      return 8;
    case ElementKind::i32:
      return 4;
    case ElementKind::u8:
      return 1;
  }
  return 8;
}

std::vector<ResultDataset> result_datasets(const ResultLayout& l) {
  std::vector<ResultDataset> sets;
  for (std::size_t i = 0; i < result_fields.size(); ++i) {
    const ResultField& f = result_fields[i];
    if (!present(f.presence, l)) continue;
    if (f.presence != Presence::each_map) {
      sets.push_back(dataset(f, l, 0));
      continue;
    }
    // A run of per-map rows: all of map 0, then all of map 1, ...
    std::size_t end = i;
    while (end < result_fields.size() && result_fields[end].presence == Presence::each_map) ++end;
    for (std::size_t k = 0; k < l.maps.size(); ++k)
      for (std::size_t j = i; j < end; ++j) sets.push_back(dataset(result_fields[j], l, k));
    i = end - 1;
  }
  return sets;
}

bool PointResult::operator==(const PointResult& o) const {
  // Bitwise, so that NaN equals NaN and -0 differs from +0.
  const auto same_vector = [](const auto& a, const auto& b) {
    return a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(a[0])) == 0);
  };
  for (const ResultField& f : result_fields) {
    const bool same = std::visit(
        [&](auto member) {
          if constexpr (std::is_member_object_pointer_v<decltype(member)>) {
            const auto& a = this->*member;
            const auto& b = o.*member;
            using T = std::remove_cvref_t<decltype(a)>;
            if constexpr (std::is_same_v<T, std::vector<std::vector<std::complex<double>>>>) {
              if (a.size() != b.size()) return false;
              for (std::size_t k = 0; k < a.size(); ++k)
                if (!same_vector(a[k], b[k])) return false;
              return true;
            } else if constexpr (std::is_trivially_copyable_v<T>) {
              return std::memcmp(&a, &b, sizeof(T)) == 0;
            } else {
              return same_vector(a, b);
            }
          } else {
            return true;  // no member
          }
        },
        f.source);
    if (!same) return false;
  }
  return true;
}

}  // namespace gratingsim::io
