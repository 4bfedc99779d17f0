#include "app/phases.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <numeric>

#include "app/table.hpp"

namespace gratingsim::app {

std::vector<BatchPhases> batch_phases(const io::ResultReader& reader) {
  const io::ResultLayout& l = reader.layout();
  const std::size_t per_wavelength = l.theta_deg.size() * l.phi_deg.size();
  std::vector<BatchPhases> out;
  for (std::size_t w = 0; w < l.batches(); ++w) {  // a parameter point (if any) at a wavelength
    BatchPhases b;
    const std::vector<std::size_t> index = l.sweep_indices(w * per_wavelength);
    for (std::size_t k = 0; k < l.parameters.size(); ++k) {
      char value[96];
      std::snprintf(value, sizeof value, "%s = %g, ", l.parameters[k].name.c_str(), l.parameters[k].values[index[k]]);
      b.label += value;
    }
    char label[64];
    std::snprintf(label, sizeof label, "λ = %g nm", l.wavelength_nm[l.wavelength_index_of(w * per_wavelength)]);
    b.label += label;
    bool incomplete = false;
    std::vector<std::array<double, physics::phase_count>> seen;  // the distinct batches of this wavelength
    for (std::size_t j = 0; j < per_wavelength; ++j) {
      const auto row = reader.read(w * per_wavelength + j).phase_seconds;
      bool known = false;
      for (const auto& s : seen) known = known || std::memcmp(s.data(), row.data(), sizeof row) == 0;
      if (known) continue;
      seen.push_back(row);
      for (std::size_t p = 0; p < physics::phase_count; ++p) {
        if (std::isnan(row[p])) incomplete = true;
        else b.times.seconds[p] += row[p];
      }
    }
    if (incomplete) b.label += " (incomplete)";
    out.push_back(std::move(b));
  }
  return out;
}

std::string format_phase_table(const std::vector<BatchPhases>& batches, double wall_seconds, std::size_t rows,
                               std::size_t largest) {
  std::vector<Column> columns{{"batch", 0, true}};
  for (const std::string_view name : physics::phase_names) columns.push_back({std::string(name)});
  columns.push_back({"sum"});
  const auto seconds = [](double s) {
    char text[32];
    std::snprintf(text, sizeof text, "%.3f", s);
    return std::string(text);
  };
  const auto row_of = [&](const std::string& label, const physics::PhaseTimes& t) {
    std::vector<std::string> row{label};
    for (const double s : t.seconds) row.push_back(seconds(s));
    row.push_back(seconds(t.total()));
    return row;
  };
  physics::PhaseTimes total;
  for (const BatchPhases& b : batches) total += b.times;
  std::vector<std::size_t> shown(batches.size());  // the batches with a row, in sweep order
  std::iota(shown.begin(), shown.end(), std::size_t(0));
  const bool abridged = batches.size() > rows;
  if (abridged) {
    const std::size_t kept = std::min(largest, shown.size());
    std::partial_sort(shown.begin(), shown.begin() + std::ptrdiff_t(kept), shown.end(),
                      [&](std::size_t a, std::size_t b) {  // ties (a unit's batches share its writes): sweep order
                        const double ta = batches[a].times.total(), tb = batches[b].times.total();
                        return ta > tb || (ta == tb && a < b);
                      });
    shown.resize(kept);
    std::sort(shown.begin(), shown.end());
  }
  std::vector<std::vector<std::string>> table;
  for (const std::size_t i : shown) table.push_back(row_of(batches[i].label, batches[i].times));
  table.push_back(row_of("total (" + std::to_string(batches.size()) + " batches)", total));
  std::vector<std::string> share{"share of the wall time"};
  for (const double s : total.seconds) share.push_back(wall_seconds > 0 ? seconds(100 * s / wall_seconds) + " %" : "-");
  share.push_back(wall_seconds > 0 ? seconds(100 * total.total() / wall_seconds) + " %" : "-");
  table.push_back(share);
  widen(columns, table);
  std::string text = format_header(columns) + "\n";
  for (const auto& row : table) text += format_row(columns, row) + "\n";
  if (abridged)
    text += "  (" + std::to_string(batches.size()) + " batches: the " + std::to_string(shown.size()) +
            " that took longest shown; the total is of all)\n";
  char line[200];
  if (total.total() <= 1.01 * wall_seconds + 1e-3)  // (within the clocks' and the printing's rounding)
    std::snprintf(line, sizeof line,
                  "  phases sum to %.3f s of %.3f s wall time (the rest: between batches, progress, summary)\n",
                  total.total(), wall_seconds);
  else  // units solved side by side: workers, MPI ranks, Richardson's two device solves
    std::snprintf(line, sizeof line,
                  "  phases sum to %.3f s, %.1f times the %.3f s of wall time: batches solved side by side overlap\n",
                  total.total(), total.total() / wall_seconds, wall_seconds);
  return text + line;
}

}  // namespace gratingsim::app
