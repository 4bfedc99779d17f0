// Reading a case file: YAML → Case, strictly, with every error located (see io/SCHEMA.md).
#include "io/case.hpp"

#include "io/dimension_scales.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <complex>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iomanip>
#include <limits>
#include <map>
#include <numbers>
#include <set>
#include <sstream>

#include "core/host_memory.hpp"
#include "io/expression.hpp"
#include "io/fit_settings.hpp"
#include "io/index_table.hpp"
#include "io/npy.hpp"
#include "io/png.hpp"
#include "io/strict_yaml.hpp"
#include "physics/discretisation.hpp"
#include "physics/problem.hpp"
#include "physics/solver.hpp"

namespace gratingsim::io {

namespace {
std::string located(const std::string& file, int line, int column, const std::string& message) {
  std::ostringstream os;
  os << file;
  if (line > 0) os << ':' << line << ':' << column;
  os << ": error: " << message;
  return os.str();
}
}  // namespace

CaseError::CaseError(std::string file, int line, int column, std::string message)
    : InvalidArgument(located(file, line, column, message)),
      file_(std::move(file)),
      line_(line),
      column_(column),
      message_(std::move(message)) {}

std::string_view to_string(LengthUnit unit) {
  switch (unit) {
    case LengthUnit::nm:
      return "nm";
    case LengthUnit::um:
      return "um";
    case LengthUnit::m:
      return "m";
  }
  return "?";
}

double nanometres_per(LengthUnit unit) {
  switch (unit) {
    case LengthUnit::nm:
      return 1.0;
    case LengthUnit::um:
      return 1e3;
    case LengthUnit::m:
      return 1e9;
  }
  return 0.0;
}

std::size_t Case::points() const {
  return parameter_points() * wavelength_nm.size() * incidence.theta_deg.size() * incidence.phi_deg.size();
}

std::size_t Case::parameter_points() const {
  std::size_t n = 1;
  for (const auto& axis : parameters) n *= axis.values.size();
  return n;
}

std::vector<double> Case::parameter_point(std::size_t index) const {
  GS_EXPECTS(index < parameter_points(), "parameter point " + std::to_string(index) + " out of range");
  std::vector<double> values(parameters.size());
  for (std::size_t k = parameters.size(); k-- > 0;) {
    const std::size_t n = parameters[k].values.size();
    values[k] = parameters[k].values[index % n];
    index /= n;
  }
  return values;
}

double Case::total_thickness_nm() const {
  double h = 0;
  for (const auto& layer : structure.layers) h += layer.thickness;
  return h;
}

int Case::total_slices() const {
  std::int64_t n = 0;  // the reader refuses more than max_total_slices; a Case built otherwise is checked here
  for (const auto& layer : structure.layers) n += layer.slices;
  GS_EXPECTS(n <= std::numeric_limits<int>::max(), "the layers have " + std::to_string(n) + " slices in all, more than an int holds");
  return int(n);
}

const physics::Material& Case::material(std::string_view name) const {
  const auto it = materials.find(name);
  GS_EXPECTS(it != materials.end(), "unknown material '" + std::string(name) + "'");
  return it->second;
}

std::size_t estimated_solver_bytes(const Case& c) {
  const SolverOptions& solver = c.numerics.solver;
  const physics::Method method = physics::krylov_method(solver.method, c.structure, c.wavelength_nm);
  const int krylov_vectors = physics::solve_space_size({.method = method, .restart = solver.restart});
  const bool auto_slices = c.numerics.accuracy && c.numerics.accuracy->slices;
  const std::size_t slices =
      std::size_t(auto_slices ? c.numerics.accuracy->max_slices : c.total_slices()) * (c.numerics.richardson ? 2 : 1);
  const std::size_t orders = std::size_t(2 * c.numerics.harmonics_x + 1) * std::size_t(2 * c.numerics.harmonics_y + 1);
  const std::size_t incidences = c.incidence.theta_deg.size() * c.incidence.phi_deg.size();
  const std::size_t real_bytes = c.numerics.precision == Precision::single ? 4 : 8;
  return physics::estimate_bytes(slices, orders, incidences, c.numerics.harmonics_x, c.numerics.harmonics_y, real_bytes,
                                 krylov_vectors, solver.method == physics::Method::dense_lu, c.numerics.formulation);
}

namespace {

using yaml::Map;
using yaml::Node;

/// Largest slice count of one layer (given or by default) and of the whole stack (before Richardson's
/// doubling): far beyond any useful case, and small enough that every count derived from them (twice
/// the total, slice indices) fits in an int.
constexpr long long max_layer_slices = 100'000;
constexpr long long max_total_slices = 1'000'000;
/// Pixels of a raster array (16 Mi: 256 MiB as complex doubles, a 4096 × 4096 image).
constexpr std::size_t max_raster_pixels = std::size_t(1) << 24;
/// Largest number of sweep points (wavelengths × θ × φ), as for the points of one sweep axis.
constexpr double max_points = 10'000'000;

std::string format_length(double nm) {
  std::ostringstream os;
  os << nm << " nm";
  return os.str();
}

std::string format_number(double value) {
  std::ostringstream os;
  os << value;
  return os.str();
}

std::string format_gib(double bytes) {
  std::ostringstream os;
  os.precision(3);
  os << bytes / double(1ull << 30) << " GiB";
  return os.str();
}

/// Reads one case file; holds what later checks need (where each material was defined and used).
class CaseReader {
 public:
  /// `point`: the values of the parameter axes to read the case at (null: the first of each axis).
  CaseReader(std::string_view text, const std::string& name, const std::string& base_directory,
             const std::vector<double>* point = nullptr)
      : file_(name), base_(base_directory), point_(point) {
    c_.path = name;
    c_.base_directory = base_directory;
    c_.yaml = std::string(text);
    // YAML counts a lone CR (old Mac line endings) as a line break; yaml-cpp 0.7 does not (the whole
    // file becomes one line, often one comment). The text is read with each lone CR made LF, byte for
    // byte (so positions are unchanged); c_.yaml, stored in the result, stays verbatim.
    text_ = c_.yaml;
    for (std::size_t i = 0; i < text_.size(); ++i)
      if (text_[i] == '\r' && (i + 1 == text_.size() || text_[i + 1] != '\n')) text_[i] = '\n';
  }

  Case read() {
    refuse_non_utf8();
    refuse_stray_commas();
    substitution_.text = text_;
    substitution_.values = &c_.parameter_values;
    const Node root(yaml::parse(text_, file_), "", file_, YAML::Mark(), &substitution_);
    if (root.is_null())
      root.fail("the case is empty; expected a mapping with at least wavelength, lattice, substrate, layers, numerics");
    const Map top(root, {"description", "units", "parameters", "wavelength", "incidence", "lattice", "superstrate",
                         "substrate", "materials", "layers", "numerics", "output", "fit"});
    if (const auto d = top.optional("description")) c_.description = d->string();
    if (const auto u = top.optional("units")) c_.input_units = length_unit(*u);
    scale_ = nanometres_per(c_.input_units);
    substitution_.refusal = "parameter expressions (${...}) may be used in lattice, materials and layers only";
    if (const auto p = top.optional("parameters")) read_parameters(*p);
    if (c_.parameters.empty() && c_.derived_parameters.empty()) return read_at_point(top);
    // Errors that depend on the parameters' values name them (the same file line may be valid at
    // another point of the sweep).
    try {
      return read_at_point(top);
    } catch (const yaml::ExpressionTextError&) {
      throw;  // the same at every point
    } catch (const CaseError& e) {
      std::ostringstream os;
      os << "at the parameter point ";
      bool first = true;
      for (const auto& axis : c_.parameters) {
        os << (first ? "" : ", ") << axis.name << " = " << c_.parameter_values.at(axis.name);
        first = false;
      }
      for (const auto& derived : c_.derived_parameters)
        os << (first ? "" : ", ") << derived.name << " = " << c_.parameter_values.at(derived.name), first = false;
      throw CaseError(e.file(), e.line(), e.column(), os.str() + ": " + e.message());
    }
  }

 private:
  /// The case with c_.parameter_values set: everything but the description, units and parameters.
  Case read_at_point(const Map& top) {
    const auto with_parameters = [&](auto read) {  // expressions are numbers in these sections only
      substitution_.enabled = true;
      read();
      substitution_.enabled = false;
    };
    if (const auto m = top.optional("materials")) with_parameters([&] { read_materials(*m); });
    c_.wavelength_nm = sweep(top.required("wavelength"), "wavelength",
                             [](double w) { return w > 0 ? "" : "wavelengths must be > 0"; });
    for (double& w : c_.wavelength_nm) w *= scale_;
    if (const auto i = top.optional("incidence")) read_incidence(*i);
    check_points(top.optional("incidence").value_or(top.required("wavelength")));
    with_parameters([&] { read_lattice(top.required("lattice")); });

    if (const auto s = top.optional("superstrate")) {
      superstrate_ = reference(*s);
      c_.structure_source.superstrate = source_of(*s);
    } else {
      superstrate_ = reference_default("air", top.node());
      c_.structure_source.superstrate = source_of(top.node());
    }
    c_.structure.superstrate = c_.materials.at(superstrate_);
    c_.structure.substrate = material(top.required("substrate"));
    c_.structure_source.substrate = source_of(top.required("substrate"));
    with_parameters([&] { read_layers(top.required("layers")); });
    read_numerics(top.required("numerics"));
    read_output(top.optional("output"));

    check_materials();
    assign_default_slices(top.required("layers"));
    check_slicing();
    finish_accuracy();
    check_structure(top.required("layers"));
    check_memory(top.required("layers"));
    warn_unused_parameters();
    return std::move(c_);
  }

  // --- parameters (io/SCHEMA.md §1.11) -----------------------------------------------------------
  /// The axes (each a sweep of numbers) and the computed parameters (one expression each, over any
  /// other parameters, without cycles); then c_.parameter_values at point_ (or the axes' first values).
  void read_parameters(const Node& n) {
    const Map all = Map::any_keys(n);
    if (all.entries().empty()) n.fail("no parameters given: omit 'parameters' or give {name: values, ...}");
    const std::string refusal = substitution_.refusal;
    substitution_.refusal =
        "a parameter's values are numbers: a sweep as for wavelength, or, for one computed from others, a single "
        "expression";
    std::map<std::string, Node> nodes;  // the value node of each parameter
    for (const auto& [key, spec] : all.entries()) {
      const std::string name = key.string();
      if (!is_parameter_name(name))
        key.fail("'" + name + "' is not a parameter name (letters, digits and '_', not starting with a digit)");
      if (name == "pi" || root_name_taken(name))
        key.fail("'" + name + "' is reserved (" +
                 (name == "pi" ? std::string("the constant π in expressions") : "a name in the result file's root group") +
                 "); choose another name");
      nodes.emplace(name, spec);
      if (spec.is_expression())
        c_.derived_parameters.push_back({name, spec.string(), source_of(spec)});
      else
        c_.parameters.push_back({name, sweep(spec, "parameter '" + name + "'", [](double) { return ""; }), source_of(spec)});
    }
    substitution_.refusal = refusal;

    if (point_) {
      GS_EXPECTS(point_->size() == c_.parameters.size(),
                 "a parameter point needs " + std::to_string(c_.parameters.size()) + " values, one per axis; got " +
                     std::to_string(point_->size()));
      for (std::size_t k = 0; k < c_.parameters.size(); ++k)
        GS_EXPECTS(std::isfinite((*point_)[k]), "parameter '" + c_.parameters[k].name + "' must be finite");
    }
    for (std::size_t k = 0; k < c_.parameters.size(); ++k)
      c_.parameter_values[c_.parameters[k].name] = point_ ? (*point_)[k] : c_.parameters[k].values.front();

    // The computed parameters: references checked, then evaluated depth first (a cycle is refused at
    // the parameter where it closes).
    std::vector<std::string> names;
    for (const auto& [name, node] : nodes) names.push_back(name);
    std::map<std::string, Expression> expressions;
    for (const auto& d : c_.derived_parameters) {
      const Node& at = nodes.at(d.name);
      try {
        const Expression e = Expression::parse(d.expression);
        for (const auto& ref : e.references())
          if (nodes.count(ref.name) == 0)
            yaml::fail(at.location_at(ref.offset), at.path() + ": unknown parameter '" + ref.name + "'" +
                                                       yaml::suggestion(ref.name, names));
        expressions.emplace(d.name, e);
      } catch (const ExpressionError& e) {
        yaml::fail(at.location_at(e.offset()), at.path() + ": " + e.message());
      }
    }
    std::map<std::string, int> state;  // 1: being evaluated, 2: done
    std::vector<std::string> chain;
    const std::function<void(const std::string&)> evaluate = [&](const std::string& name) {
      const auto e = expressions.find(name);
      if (e == expressions.end() || state[name] == 2) return;
      const Node& at = nodes.at(name);
      if (state[name] == 1) {
        std::string cycle;
        for (auto it = std::find(chain.begin(), chain.end(), name); it != chain.end(); ++it) cycle += *it + " → ";
        at.fail("the parameters are defined in a cycle: " + cycle + name);
      }
      state[name] = 1;
      chain.push_back(name);
      for (const auto& ref : e->second.references()) evaluate(ref.name);
      chain.pop_back();
      try {
        c_.parameter_values[name] = e->second.evaluate(c_.parameter_values);
      } catch (const ExpressionError& error) {
        yaml::fail(at.location_at(error.offset()), at.path() + ": " + error.message());
      }
      state[name] = 2;
    };
    for (const auto& d : c_.derived_parameters) evaluate(d.name);
  }

  /// An axis no expression names, directly or through a computed parameter, repeats the same solve at each of its
  /// values: a warning (a misspelt name in an expression is an error already, Node::evaluated).
  void warn_unused_parameters() {
    std::set<std::string> used = substitution_.referenced;
    for (bool grew = true; grew;) {  // a computed parameter in use uses what it names
      grew = false;
      for (const auto& d : c_.derived_parameters)
        if (used.count(d.name)) {
          const Expression e = Expression::parse(d.expression);  // references() points into it
          for (const auto& ref : e.references()) grew |= used.insert(std::string(ref.name)).second;
        }
    }
    for (const ParameterAxis& axis : c_.parameters)
      if (!used.count(axis.name) && axis.values.size() > 1)
        c_.warnings.push_back(axis.at.file + ":" + std::to_string(axis.at.line) + ":" + std::to_string(axis.at.column) +
                              ": warning: parameter '" + axis.name + "' is never used by an expression (${...}): its " +
                              std::to_string(axis.values.size()) + " values repeat the same solve");
  }

  // --- locations ------------------------------------------------------------------------------
  static SourceLocation source_of(const Node& n) {
    const yaml::Location at = n.location();
    return {at.file, at.line, at.column, n.path()};
  }
  /// Node::fail for a value read earlier, by its recorded location.
  [[noreturn]] static void fail_at(const SourceLocation& at, const std::string& message) {
    yaml::fail({at.file, at.line, at.column}, (at.path.empty() ? "" : at.path + ": ") + message);
  }
  /// The materials of a shape as the reader builds it (one per shape, a raster's list for a raster).
  static std::vector<const physics::Material*> materials_of(const physics::Shape& shape) {
    return std::visit(
        [](const auto& s) -> std::vector<const physics::Material*> {
          using T = std::decay_t<decltype(s)>;
          if constexpr (std::is_same_v<T, physics::SlopedPolygon>) {
            return {&s.bottom.material};
          } else if constexpr (std::is_same_v<T, physics::Raster>) {
            std::vector<const physics::Material*> all;
            for (const auto& m : s.materials) all.push_back(&m);
            return all;
          } else {
            return {&s.material};
          }
        },
        shape);
  }

  // --- values ---------------------------------------------------------------------------------
  /// nm, um or m; spelled-out names and µm get a pointer to the accepted spelling.
  static LengthUnit length_unit(const Node& n) {
    const std::string word = n.string();
    const std::pair<const char*, const char*> aliases[] = {
        {"µm", "um"},         {"μm", "um"},        {"micron", "um"},    {"microns", "um"}, {"micrometer", "um"},
        {"micrometre", "um"}, {"nanometer", "nm"}, {"nanometre", "nm"}, {"meter", "m"},    {"metre", "m"}};
    for (const auto& [alias, unit] : aliases)
      if (word == alias)
        n.fail("unknown length unit '" + word + "'; did you mean '" + unit + "'? (expected one of: nm, um, m)");
    return n.choice<LengthUnit>({{"nm", LengthUnit::nm}, {"um", LengthUnit::um}, {"m", LengthUnit::m}});
  }
  double length(const Node& n) const {  // a positive length, in nm
    const double v = n.number();
    if (v <= 0)
      n.fail("expected a positive length (in " + std::string(to_string(c_.input_units)) + "), got " + n.describe());
    return v * scale_;
  }
  double non_negative_length(const Node& n) const {
    const double v = n.number();
    if (v < 0) n.fail("expected a length ≥ 0 (in " + std::string(to_string(c_.input_units)) + "), got " + n.describe());
    return v * scale_;
  }
  int integer_in(const Node& n, long long lo, long long hi, const std::string& what) const {
    const long long v = n.integer();
    if (v < lo || v > hi)
      n.fail("expected " + what + " (an integer in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]), got " +
             std::to_string(v));
    return int(v);
  }
  std::array<double, 2> point(const Node& n) const {  // [x, y] in nm
    const auto items = n.items();
    if (items.size() != 2) n.fail("expected a point [x, y], got a list of " + std::to_string(items.size()));
    return {items[0].number() * scale_, items[1].number() * scale_};
  }

  /// A sweep: one number, a list of numbers, or {start, stop, count} (count ≥ 1, inclusive ends).
  /// Values are returned as written (not scaled). `check` returns "" for a valid value, else what is
  /// wrong, reported at the offending list element (or at the range). Duplicates are errors.
  std::vector<double> sweep(const Node& n, const std::string& what, const std::function<std::string(double)>& check) {
    std::vector<double> values;
    const auto checked = [&](const Node& where, double value) {
      if (const std::string problem = check(value); !problem.empty())
        where.fail(problem + ", got " + format_number(value));
      values.push_back(value);
    };
    if (n.is_scalar()) {
      checked(n, n.number());
    } else if (n.is_sequence()) {
      const auto items = n.items();
      if (items.empty()) n.fail("empty " + what + " sweep: give one value, a list of values, or {start, stop, count}");
      for (const auto& item : items) checked(item, item.number());
    } else if (n.is_map()) {
      const Map m(n, {"start", "stop", "count"});
      const Node start_node = m.required("start"), stop_node = m.required("stop");
      const double start = start_node.number(), stop = stop_node.number();
      const Node count_node = m.required("count");
      const long long count = count_node.integer();
      if (count < 1) count_node.fail("empty " + what + " sweep: count must be ≥ 1, got " + std::to_string(count));
      if (count > 10'000'000)
        count_node.fail("a sweep of " + std::to_string(count) + " points is beyond reason (max 10000000)");
      if (count == 1 && start != stop) count_node.fail("count 1 needs start == stop (or give a single value)");
      if (count > 1 && start == stop) count_node.fail("start == stop with count > 1 repeats one value");
      checked(start_node, start);
      checked(stop_node, stop);
      values.clear();
      for (long long i = 0; i < count; ++i)
        values.push_back(i + 1 == count ? stop : start + (stop - start) * double(i) / double(count - 1));
    } else {
      n.fail("expected a " + what + " sweep (a number, a list, or {start, stop, count}), got " + n.describe());
    }
    std::vector<double> sorted = values;
    std::sort(sorted.begin(), sorted.end());
    if (std::adjacent_find(sorted.begin(), sorted.end()) != sorted.end())
      n.fail("the " + what + " sweep repeats a value");
    return values;
  }

  // --- materials ------------------------------------------------------------------------------
  static bool built_in(const std::string& name) {
    const auto names = physics::library_names();
    return std::find(names.begin(), names.end(), name) != names.end();
  }

  void read_materials(const Node& n) {
    const Map all = Map::any_keys(n);
    for (const auto& [key, spec] : all.entries()) {
      const std::string name = key.string();
      if (built_in(name)) key.fail("material '" + name + "' is built in; choose another name for your own definition");
      const Map m(spec, {"n", "k", "epsilon", "table", "units", "sellmeier"});
      const int kinds = int(m.has("n")) + int(m.has("epsilon")) + int(m.has("table")) + int(m.has("sellmeier"));
      if (kinds != 1)
        spec.fail("a material is given by exactly one of: n (with optional k), epsilon, table, sellmeier; got " +
                  std::to_string(kinds));
      if (m.has("k") && !m.has("n")) m.required("k").fail("k belongs with n");
      if (m.has("units") && !m.has("table"))
        m.required("units").fail("units applies to a table's wavelength column only");
      std::optional<physics::Material> material;
      if (const auto n_node = m.optional("n")) {
        const double re = n_node->number();
        if (re <= 0) n_node->fail("the refractive index n must be > 0, got " + n_node->describe());
        double im = 0;
        if (const auto k_node = m.optional("k")) {
          im = k_node->number();
          if (im < 0)
            k_node->fail("the extinction coefficient k must be ≥ 0 (loss is k > 0 with exp(-iωt)), got " +
                         k_node->describe());
        }
        const std::complex<double> eps = std::complex<double>(re, im) * std::complex<double>(re, im);
        if (!std::isfinite(eps.real()) || !std::isfinite(eps.imag()))
          spec.fail("the permittivity (n + ik)² of n = " + n_node->describe() + ", k = " + m.required("k").describe() +
                    " is not finite in double precision");
        material = physics::Material::constant_index({re, im}, name);
      } else if (const auto e = m.optional("epsilon")) {
        const auto parts = e->items();
        if (parts.size() != 2) e->fail("expected [Re ε, Im ε], got a list of " + std::to_string(parts.size()));
        const double re = parts[0].number(), im = parts[1].number();
        if (im < 0) parts[1].fail("Im ε must be ≥ 0 (loss is Im ε > 0 with exp(-iωt)), got " + parts[1].describe());
        if (re == 0 && im == 0) e->fail("ε = 0 is not a material");
        material = physics::Material::constant_permittivity({re, im}, name);
      } else if (const auto t = m.optional("table")) {
        LengthUnit unit = c_.input_units;
        if (const auto u = m.optional("units")) unit = length_unit(*u);
        const std::filesystem::path file = std::filesystem::path(base_) / t->string();
        std::error_code error;
        const std::filesystem::file_status status = std::filesystem::status(file, error);
        if (!std::filesystem::exists(status)) t->fail("index table '" + file.string() + "' not found");
        if (!std::filesystem::is_regular_file(status))
          t->fail("index table '" + file.string() + "' is not a regular file (a directory, device, FIFO or socket)");
        IndexTable table = read_index_table(file.string(), unit);
        c_.inputs.push_back(file.string());
        material =
            physics::Material::tabulated(name, std::move(table.wavelength_nm), std::move(table.n), std::move(table.k));
      } else {
        const Node s = m.required("sellmeier");
        const Map sm(s, {"B", "resonances", "range"});
        std::vector<double> b, resonances;
        const Node b_node = sm.required("B"), r_node = sm.required("resonances"), range = sm.required("range");
        for (const auto& item : b_node.items()) b.push_back(item.number());
        for (const auto& item : r_node.items()) resonances.push_back(non_negative_length(item));
        if (b.empty()) b_node.fail("a Sellmeier model needs at least one term");
        if (b.size() != resonances.size())
          r_node.fail("expected " + std::to_string(b.size()) + " resonance wavelengths (one per B), got " +
                      std::to_string(resonances.size()));
        const auto ends = range.items();
        if (ends.size() != 2) range.fail("expected [shortest, longest] wavelength where the coefficients hold");
        const double lo = length(ends[0]), hi = length(ends[1]);
        if (hi <= lo) ends[1].fail("the range must end above its start");
        // A resonance inside the range is a pole of n²: the model holds on one side of it only.
        const auto items = r_node.items();
        for (std::size_t i = 0; i < resonances.size(); ++i)
          if (resonances[i] >= lo && resonances[i] <= hi)
            items[i].fail("resonance " + items[i].describe() + " lies inside the model's range [" + ends[0].describe() +
                          ", " + ends[1].describe() + "], where n² has a pole; the range must lie on one side of "
                          "every resonance");
        material = physics::Material::sellmeier(name, std::move(b), std::move(resonances), lo, hi);
      }
      defined_.emplace(name, spec);
      c_.materials.emplace(name, std::move(*material));
    }
  }

  /// A material name used somewhere; must be defined under materials or built in.
  std::string reference(const Node& n) {
    const std::string name = n.string();
    if (c_.materials.count(name) == 0) {
      if (!built_in(name)) {
        std::vector<std::string> names;  // the user's materials, then the built-in ones
        for (const auto& [defined, node] : defined_) names.push_back(defined);
        for (const auto& b : physics::library_names()) names.push_back(b);
        n.fail("unknown material '" + name + "', neither built in nor defined under 'materials'" +
               yaml::suggestion(name, names));
      }
      c_.materials.emplace(name, physics::library_material(name, 1.0));
    }
    used_.emplace(name, n);
    return name;
  }
  /// The material a name refers to (reference()), as the structure holds it.
  physics::Material material(const Node& n) { return c_.materials.at(reference(n)); }
  std::string reference_default(const std::string& name, const Node& where) {
    c_.materials.emplace(name, physics::library_material(name, 1.0));
    used_.emplace(name, where);
    return name;
  }

  /// Every referenced material must give an index at every wavelength; the superstrate must be
  /// lossless (docs/formulation.md §1: medium 1 carries the Green function and the far-field normalisation).
  void check_materials() {
    std::vector<std::string> unused;
    for (const auto& [name, material] : c_.materials) {
      const auto use = used_.find(name);
      const auto def = defined_.find(name);
      if (use == used_.end()) {
        const auto where = def->second.location();
        c_.warnings.push_back(where.file + ":" + std::to_string(where.line) + ":" + std::to_string(where.column) +
                              ": warning: material '" + name + "' is defined but never used");
        unused.push_back(name);
        continue;
      }
      const Node& blame = def != defined_.end() ? def->second : use->second;
      for (const double w : c_.wavelength_nm) {
        try {
          (void)material.permittivity(w);  // in range, finite, Im ε ≥ 0 (physics/materials.cpp)
        } catch (const InvalidArgument& e) {
          blame.fail(e.what());
        }
      }
    }
    for (const auto& name : unused) c_.materials.erase(name);
    const physics::Material& top = c_.materials.at(superstrate_);
    for (const double w : c_.wavelength_nm) {
      const double k = top.index(w).imag();
      if (k != 0) {
        std::ostringstream os;
        os << "the superstrate must be lossless, but '" << superstrate_ << "' has k = " << k << " at "
           << format_length(w);
        used_.at(superstrate_).fail(os.str());
      }
    }
  }

  // --- illumination and lattice ---------------------------------------------------------------
  void read_incidence(const Node& n) {
    const Map m(n, {"theta_deg", "phi_deg", "polarization"});
    if (const auto t = m.optional("theta_deg")) {
      c_.incidence.theta_deg = sweep(*t, "theta_deg", [](double theta) {
        return theta >= 0 && theta < 90 ? "" : "the polar angle must lie in [0, 90) degrees";
      });
    }
    if (const auto p = m.optional("phi_deg")) {
      c_.incidence.phi_deg = sweep(*p, "phi_deg", [](double phi) {
        return phi >= -360 && phi <= 360 ? "" : "the azimuth must lie in [-360, 360] degrees";
      });
    }
    if (const auto pol = m.optional("polarization"))
      c_.incidence.polarization =
          pol->choice<Polarization>({{"s", Polarization::s}, {"p", Polarization::p}, {"both", Polarization::both}});
  }

  /// The number of sweep points, in double (three axes of up to 10⁷ values each overflow 64 bits).
  void check_points(const Node& where) const {
    double parameter_points = 1;
    for (const auto& axis : c_.parameters) parameter_points *= double(axis.values.size());
    const double points = parameter_points * double(c_.wavelength_nm.size()) *
                          double(c_.incidence.theta_deg.size()) * double(c_.incidence.phi_deg.size());
    if (points > max_points) {
      std::ostringstream os;
      os << "the sweep has " << points << " points (";
      if (!c_.parameters.empty()) os << parameter_points << " parameter points × ";
      os << c_.wavelength_nm.size() << " wavelengths × "
         << c_.incidence.theta_deg.size() << " θ × " << c_.incidence.phi_deg.size() << " φ), more than the limit of "
         << max_points;
      where.fail(os.str());
    }
  }

  void read_lattice(const Node& n) {
    const Map m(n, {"period_x", "period_y", "rotation_deg"});
    c_.structure.lattice.period_x = length(m.required("period_x"));
    if (const auto y = m.optional("period_y")) c_.structure.lattice.period_y = length(*y);  // else 0: 1D
    // rotation_deg: the 1D grating turned counter-clockwise about +z (seen from above) by α, its
    // grating vector at α from the x axis (physics::Lattice::rotation_deg, io/SCHEMA.md §1.3.1).
    if (const auto r = m.optional("rotation_deg")) {
      if (!c_.structure.lattice.one_dimensional())
        r->fail("the rotation turns a 1D grating only (lines along y, no period_y); a 2D lattice takes none: "
                "place and turn its shapes in x, y");
      const double alpha = r->number();  // finite: number() refuses .inf and .nan
      if (alpha < -360 || alpha > 360) r->fail("the rotation must lie in [-360, 360] degrees, got " + r->describe());
      c_.structure.lattice.rotation_deg = alpha;
    }
    c_.structure_source.lattice = source_of(n);
  }

  // --- layers and shapes ----------------------------------------------------------------------
  void read_layers(const Node& n) {
    const auto items = n.items();
    if (items.empty()) n.fail("empty layer stack: give at least one layer (top to bottom)");
    std::set<std::string> names;
    for (std::size_t i = 0; i < items.size(); ++i) {
      const Node& item = items[i];
      const Map m(item, {"name", "thickness", "slices", "material", "background", "shapes"});
      physics::Layer layer;
      LayerSource source;
      source.at = source_of(item);
      source.name = "layer" + std::to_string(i);
      if (const auto name = m.optional("name")) {
        source.name = name->string();
        if (!names.insert(source.name).second) name->fail("layer name '" + source.name + "' is already used");
      }
      layer.thickness = length(m.required("thickness"));
      layer.slices = 0;  // 0: default, assigned once materials are known
      if (const auto s = m.optional("slices")) {
        layer.slices = integer_in(*s, 1, max_layer_slices, "a slice count");
        source.slices = source_of(*s);
      }
      source.thickness = source_of(m.required("thickness"));
      if (const auto film = m.optional("material")) {
        for (const char* key : {"shapes", "background"})
          if (const auto extra = m.optional(key))
            extra->fail(std::string("a uniform film takes 'material' alone; '") + key +
                        "' belongs to a patterned layer (without 'material')");
        layer.background = material(*film);
      } else {
        if (!m.has("shapes")) item.fail("a layer needs 'material' (a uniform film) or 'shapes' (a patterned layer)");
        const Node shapes = m.required("shapes");
        const auto shape_items = shapes.items();
        if (shape_items.empty()) shapes.fail("a patterned layer needs at least one shape");
        if (const auto b = m.optional("background"))
          layer.background = material(*b);
        else
          layer.background = c_.structure.superstrate;
        for (const auto& s : shape_items) {
          layer.shapes.push_back(read_shape(s, layer.thickness, layer.background));
          source.shapes.push_back(source_of(s));
        }
        refuse_slope_with_taper(shape_items, layer.shapes);
        for (std::size_t k = 0; k < layer.shapes.size(); ++k)
          if (std::holds_alternative<physics::Raster>(layer.shapes[k]) && layer.shapes.size() > 1)
            shape_items[k].fail("a raster covers the whole cell and must be the only shape of its layer (this layer "
                                "has " + std::to_string(layer.shapes.size()) + ")");
      }
      c_.structure.layers.push_back(std::move(layer));
      c_.structure_source.layers.push_back(std::move(source));
    }
  }

  /// A layer holding a tapered circle is solved as one step per slice, every shape cut at the step's
  /// height (physics::TaperedEllipse); a sloped polygon would lose its slope there, so the pair is
  /// refused (io/SCHEMA.md §1.6), at the later of the two shapes.
  static void refuse_slope_with_taper(const std::vector<Node>& items, const std::vector<physics::Shape>& shapes) {
    std::optional<std::size_t> tapered, sloped;
    for (std::size_t i = 0; i < shapes.size(); ++i) {
      if (std::holds_alternative<physics::TaperedEllipse>(shapes[i])) tapered = tapered.value_or(i);
      if (std::holds_alternative<physics::SlopedPolygon>(shapes[i])) sloped = sloped.value_or(i);
    }
    if (!tapered || !sloped) return;
    const std::string circle = "shapes[" + std::to_string(*tapered) + "]", polygon = "shapes[" + std::to_string(*sloped) + "]";
    items[std::max(*tapered, *sloped)].fail(
        "a layer holding a tapered circle (" + circle + ") may not also hold a sloped polygon (" + polygon +
        ", sidewall_angle_deg ≠ 90): such a layer is cut into steps where the polygon's slope would be lost; "
        "give the polygon sidewall_angle_deg: 90, the circle one diameter, or put them in separate layers");
  }

  /// A sidewall angle from the substrate plane (90 = vertical, > 90 re-entrant), in (0, 180) degrees.
  static double sidewall_angle(const Node& n) {
    const double alpha = n.number();
    if (alpha <= 0 || alpha >= 180)
      n.fail("the sidewall angle (from the substrate plane, 90 = vertical) must lie in (0, 180) degrees, got " +
             n.describe());
    return alpha;
  }

  void check_width(const Node& n, double width_nm, double period_nm, const char* axis) const {
    if (width_nm > period_nm)
      n.fail("the shape is " + format_length(width_nm) + " wide along " + axis + ", more than the period " +
             format_length(period_nm));
  }

  /// A shape as the physics library takes it, in nm (Case::structure says which kind each becomes);
  /// `background`: the layer's, mixed into a raster mask's partly filled pixels.
  physics::Shape read_shape(const Node& n, double thickness_nm, const physics::Material& background) {
    const Node type_node = Map::any_keys(n).required("type");
    enum class Type { line, trapezoid, rectangle, circle, ellipse, polygon, raster };
    const Type type = type_node.choice<Type>({{"line", Type::line},
                                              {"trapezoid", Type::trapezoid},
                                              {"rectangle", Type::rectangle},
                                              {"circle", Type::circle},
                                              {"ellipse", Type::ellipse},
                                              {"polygon", Type::polygon},
                                              {"raster", Type::raster}});
    const bool one_d = c_.structure.lattice.one_dimensional();
    if (one_d && type != Type::line && type != Type::trapezoid && type != Type::raster)
      type_node.fail("'" + type_node.string() +
                     "' needs a 2D lattice (lattice.period_y); a 1D grating takes line, trapezoid and raster shapes");
    const double px = c_.structure.lattice.period_x, py = c_.structure.lattice.period_y;
    const auto center_2d = [&](const Map& m, double& x, double& y) {
      if (const auto c = m.optional("center")) {
        const auto p = point(*c);
        x = p[0];
        y = p[1];
      }
    };
    switch (type) {
      case Type::line:
      case Type::trapezoid: {
        const Map m = type == Type::line
                          ? Map(n, {"type", "material", "center", "width"})
                          : Map(n, {"type", "material", "center", "bottom_width", "top_width", "sidewall_angle_deg"});
        const physics::Material material = this->material(m.required("material"));
        double center = 0, bottom_width = 0, top_width = 0;  // nm
        if (const auto c = m.optional("center")) center = c->number() * scale_;
        if (type == Type::line) {
          const Node w = m.required("width");
          bottom_width = top_width = length(w);
          check_width(w, bottom_width, px, "x");
        } else {
          const Node bottom = m.required("bottom_width");
          bottom_width = non_negative_length(bottom);
          check_width(bottom, bottom_width, px, "x");
          const auto top = m.optional("top_width");
          const auto angle = m.optional("sidewall_angle_deg");
          if (top.has_value() == angle.has_value())
            n.fail("a trapezoid takes exactly one of top_width, sidewall_angle_deg");
          if (top) {
            top_width = non_negative_length(*top);
            check_width(*top, top_width, px, "x");
          } else {
            top_width =
                bottom_width - 2 * thickness_nm / std::tan(sidewall_angle(*angle) * std::numbers::pi / 180);
            if (top_width < 0)
              angle->fail("a sidewall angle of " + angle->describe() + " degrees over the layer's " +
                          format_length(thickness_nm) + " gives a negative top width (" +
                          format_length(top_width) + ")");
            check_width(*angle, top_width, px, "x");
          }
          if (bottom_width == 0 && top_width == 0) bottom.fail("the trapezoid has zero width");
        }
        // top = bottom − 2·thickness/tan α (physics::TrapezoidLine), 90° for vertical walls.
        const double alpha = std::atan2(2 * thickness_nm, bottom_width - top_width) * 180 / std::numbers::pi;
        return physics::TrapezoidLine{center, bottom_width, alpha, material};
      }
      case Type::rectangle: {
        const Map m(n, {"type", "material", "center", "width_x", "width_y"});
        physics::Rectangle r;
        r.material = material(m.required("material"));
        center_2d(m, r.center.x, r.center.y);
        const Node wx = m.required("width_x"), wy = m.required("width_y");
        r.width_x = length(wx);
        r.width_y = length(wy);
        check_width(wx, r.width_x, px, "x");
        check_width(wy, r.width_y, py, "y");
        return r;
      }
      case Type::circle:
      case Type::ellipse: {
        const Map m = type == Type::circle
                          ? Map(n, {"type", "material", "center", "diameter", "bottom_diameter", "top_diameter"})
                          : Map(n, {"type", "material", "center", "diameter_x", "diameter_y", "rotation_deg"});
        const physics::Material material = this->material(m.required("material"));
        double cx = 0, cy = 0, rotation = 0;  // nm, degrees
        double bottom_x = 0, bottom_y = 0, top_x = 0, top_y = 0;  // diameters (nm)
        center_2d(m, cx, cy);
        if (type == Type::circle) {
          if (const auto d = m.optional("diameter")) {
            for (const char* key : {"bottom_diameter", "top_diameter"})
              if (const auto extra = m.optional(key))
                extra->fail("a circle takes either diameter or bottom_diameter and top_diameter (tapered)");
            const double v = length(*d);
            check_width(*d, v, std::min(px, py), "x and y");
            bottom_x = bottom_y = top_x = top_y = v;
          } else {
            if (!m.has("bottom_diameter") && !m.has("top_diameter"))
              n.fail("a circle needs diameter, or bottom_diameter and top_diameter (tapered)");
            const Node b = m.required("bottom_diameter"), t = m.required("top_diameter");
            const double vb = non_negative_length(b), vt = non_negative_length(t);
            check_width(b, vb, std::min(px, py), "x and y");
            check_width(t, vt, std::min(px, py), "x and y");
            if (vb == 0 && vt == 0) b.fail("the circle has zero diameter");
            bottom_x = bottom_y = vb;
            top_x = top_y = vt;
          }
        } else {
          const Node dx = m.required("diameter_x"), dy = m.required("diameter_y");
          bottom_x = top_x = length(dx);
          bottom_y = top_y = length(dy);
          check_width(dx, std::max(bottom_x, bottom_y), std::min(px, py), "x and y");
          if (const auto r = m.optional("rotation_deg")) rotation = r->number();
        }
        const physics::Point center{cx, cy};
        if (bottom_x == top_x && bottom_y == top_y)
          return physics::Ellipse{center, bottom_x / 2, bottom_y / 2, rotation, material};
        return physics::TaperedEllipse{center, bottom_x / 2, bottom_y / 2, top_x / 2, top_y / 2, rotation, material};
      }
      case Type::polygon: {
        const Map m(n, {"type", "material", "vertices", "sidewall_angle_deg"});
        physics::Polygon polygon;
        polygon.material = material(m.required("material"));
        const Node vertices = m.required("vertices");
        std::vector<std::array<double, 2>> corners;
        for (const auto& v : vertices.items()) corners.push_back(point(v));
        check_polygon(vertices, corners, px, py);
        for (const auto& v : corners) polygon.vertices.push_back({v[0], v[1]});
        const double angle = m.optional("sidewall_angle_deg") ? sidewall_angle(*m.optional("sidewall_angle_deg")) : 90;
        if (angle == 90) return polygon;
        return physics::SlopedPolygon{std::move(polygon), angle};
      }
      case Type::raster:
        return read_raster(n, background);
    }
    GS_EXPECTS(false, "unknown shape type");
    return physics::Rectangle{};
  }

  /// A grayscale image as the mask array it stands for (io/SCHEMA.md §1.6): element [row, column] =
  /// g/G for the image's sample g at (rows − 1 − row, column), G = 2^bits − 1 — the image's top row is the
  /// cell's top edge (y = +Λy/2), its bottom row the array's row 0 (y = −Λy/2). Values are float64 fractions.
  static NpyArray fill_fractions(const GrayImage& image) {
    NpyArray a;
    a.descr = "<f8";
    a.rows = image.rows;
    a.columns = image.columns;
    a.values.resize(image.samples.size());
    const double white = image.max_sample();
    for (std::size_t row = 0; row < a.rows; ++row)
      for (std::size_t column = 0; column < a.columns; ++column)
        a.values[row * a.columns + column] = image.samples[(a.rows - 1 - row) * a.columns + column] / white;
    return a;
  }

  /// A raster from a .npy file or a grayscale PNG image (io/SCHEMA.md §1.6): array element [row, column] is
  /// pixel (ix = column, iy = row) of physics::Raster, centred at x = −Λx/2 + (column + ½)Λx/columns,
  /// y = −Λy/2 + (row + ½)Λy/rows (row 0 at the cell's bottom edge, y = −Λy/2). An image is the cell seen
  /// from above (+z) with x to the right and y up: its top row is the array's last row, and its gray
  /// level g of G = 2^bits − 1 the mask's fill fraction g/G (images give masks only). `mask` + `material`:
  /// 0 is the layer's background, 1 the material, f in (0, 1) their mixture
  /// ε = (1 − f)·ε_background + f·ε_material (one per distinct f);
  /// `epsilon`: ε per pixel (float64 or complex128), one constant material per distinct value.
  physics::Raster read_raster(const Node& n, const physics::Material& background) {
    const Map m(n, {"type", "mask", "material", "epsilon"});
    const auto mask = m.optional("mask"), epsilon = m.optional("epsilon");
    if (mask.has_value() == epsilon.has_value())
      n.fail("a raster takes exactly one of: mask (a .npy array of fill fractions 0 to 1 or a grayscale .png image, with material), epsilon (a .npy array of ε)");
    if (epsilon && m.has("material"))
      m.required("material").fail("material belongs with mask; an epsilon map gives ε per pixel");
    const Node file_node = mask ? *mask : *epsilon;
    const std::filesystem::path file = std::filesystem::path(base_) / file_node.string();
    // A file whose name ends in .png (any case) is a PNG image, any other a .npy array.
    std::string extension = file.extension().string();
    for (char& ch : extension) ch = char(std::tolower(static_cast<unsigned char>(ch)));
    const bool image = extension == ".png";
    const std::string kind = image ? "raster image" : "raster array";
    if (image && epsilon)
      file_node.fail("an image gives a mask, not an epsilon map: write mask: " + file_node.string() +
                     " with material (gray level g of G = 2^bits − 1 fills g/G of a pixel with material, the rest is the "
                     "layer's background; with two constant-permittivity materials ε is linear in g, io/SCHEMA.md §1.6)");
    if (image && !png_supported())
      file_node.fail("raster image '" + file.string() + "': this build of gratingsim has no PNG support (libpng was not "
                     "found when it was configured: install libpng-dev and configure with -DGRATINGSIM_PNG=ON), or give "
                     "the mask as a .npy array");
    std::error_code error;
    const std::filesystem::file_status status = std::filesystem::status(file, error);
    if (!std::filesystem::exists(status)) file_node.fail(kind + " '" + file.string() + "' not found");
    if (!std::filesystem::is_regular_file(status))
      file_node.fail(kind + " '" + file.string() + "' is not a regular file (a directory, device, FIFO or socket)");
    NpyArray a;
    try {
      a = image ? fill_fractions(read_png(file.string(), max_raster_pixels)) : read_npy(file.string(), max_raster_pixels);
    } catch (const NpyError& e) {
      file_node.fail(kind + " '" + file.string() + "': " + e.what());
    } catch (const PngError& e) {
      file_node.fail(kind + " '" + file.string() + "': " + e.what());
    }
    c_.inputs.push_back(file.string());
    if (c_.structure.lattice.one_dimensional() && a.rows != 1)
      file_node.fail(std::string(image ? "the image" : "the array") + " has " + std::to_string(a.rows) +
                     " rows; a 1D lattice (no period_y) takes one row " + (image ? "(an image 1 pixel high)" : "(shape (1, columns))"));
    const auto where = [&](std::size_t i) {
      return "[" + std::to_string(i / a.columns) + ", " + std::to_string(i % a.columns) + "]";
    };
    const auto show = [](std::complex<double> v) {
      std::ostringstream os;
      os.precision(17);
      os << v.real();
      if (v.imag() != 0) os << (v.imag() < 0 ? " - " : " + ") << std::abs(v.imag()) << "i";
      return os.str();
    };
    for (std::size_t i = 0; i < a.values.size(); ++i)
      if (!std::isfinite(a.values[i].real()) || !std::isfinite(a.values[i].imag()))
        file_node.fail("element " + where(i) + " of '" + file.string() + "' is " + show(a.values[i]) +
                       "; every element must be finite");
    physics::Raster r;
    r.nx = int(a.columns);
    r.ny = int(a.rows);
    r.pixels.resize(a.values.size());
    if (mask) {
      if (!m.has("material")) n.fail("a raster mask needs 'material' (the material where the mask is 1)");
      if (a.is_complex()) file_node.fail("a mask is real (fill fractions 0 to 1); '" + file.string() + "' holds complex128");
      const Node material_node = m.required("material");
      const physics::Material filled = material(material_node);
      r.materials.push_back(filled);
      std::map<double, int> index_of{{1.0, 0}};  // fill fraction → material (1: the material itself)
      for (std::size_t i = 0; i < a.values.size(); ++i) {
        const double f = a.values[i].real();
        if (f < 0 || f > 1)
          file_node.fail("mask element " + where(i) + " is " + show(f) +
                         ", outside [0, 1] (0: background, 1: material, between: the fraction filled)");
        if (f == 0) {
          r.pixels[i] = -1;
          continue;
        }
        const auto [it, added] = index_of.try_emplace(f, int(r.materials.size()));
        if (added)
          r.materials.push_back(physics::Material::mixture(background, filled, f,
                                                           material_node.string() + " filling " + show(f)));
        r.pixels[i] = it->second;
      }
    } else {
      if (!a.is_complex() && !a.is_real_float())
        file_node.fail("an epsilon map is float64 ('<f8') or complex128 ('<c16'); '" + file.string() + "' holds '" +
                       a.descr + "'");
      // One constant material per distinct ε, in order of first appearance.
      std::map<std::pair<double, double>, int> index_of;
      const std::string file_name = file.filename().string();
      for (std::size_t i = 0; i < a.values.size(); ++i) {
        const std::complex<double> eps = a.values[i];
        if (eps.imag() < 0)
          file_node.fail("ε element " + where(i) + " is " + show(eps) + "; Im ε must be ≥ 0 (loss is Im ε > 0 with exp(-iωt))");
        if (eps == 0.0) file_node.fail("ε element " + where(i) + " is 0, which is not a material");
        const auto [it, added] = index_of.try_emplace({eps.real(), eps.imag()}, int(r.materials.size()));
        if (added) r.materials.push_back(physics::Material::constant_permittivity(eps, file_name + " ε = " + show(eps)));
        r.pixels[i] = it->second;
      }
    }
    return r;
  }

  static bool segments_cross(const std::array<double, 2>& a, const std::array<double, 2>& b,
                             const std::array<double, 2>& c, const std::array<double, 2>& d) {
    const auto orient = [](const std::array<double, 2>& p, const std::array<double, 2>& q,
                           const std::array<double, 2>& r) {
      const double v = (q[0] - p[0]) * (r[1] - p[1]) - (q[1] - p[1]) * (r[0] - p[0]);
      return (v > 0) - (v < 0);
    };
    const int o1 = orient(a, b, c), o2 = orient(a, b, d), o3 = orient(c, d, a), o4 = orient(c, d, b);
    if (o1 != o2 && o3 != o4) return true;
    const auto on = [](const std::array<double, 2>& p, const std::array<double, 2>& q, const std::array<double, 2>& r) {
      return std::min(p[0], r[0]) <= q[0] && q[0] <= std::max(p[0], r[0]) && std::min(p[1], r[1]) <= q[1] &&
             q[1] <= std::max(p[1], r[1]);
    };
    return (o1 == 0 && on(a, c, b)) || (o2 == 0 && on(a, d, b)) || (o3 == 0 && on(c, a, d)) || (o4 == 0 && on(c, b, d));
  }

  void check_polygon(const Node& n, const std::vector<std::array<double, 2>>& v, double px, double py) const {
    const std::size_t count = v.size();
    if (count < 3) n.fail("a polygon needs at least 3 vertices, got " + std::to_string(count));
    double area2 = 0, xmin = v[0][0], xmax = v[0][0], ymin = v[0][1], ymax = v[0][1];
    for (std::size_t i = 0; i < count; ++i) {
      const auto& p = v[i];
      const auto& q = v[(i + 1) % count];
      area2 += p[0] * q[1] - q[0] * p[1];
      xmin = std::min(xmin, p[0]);
      xmax = std::max(xmax, p[0]);
      ymin = std::min(ymin, p[1]);
      ymax = std::max(ymax, p[1]);
    }
    // A repeated vertex is named as such (the edge test below would call it a crossing).
    for (std::size_t i = 0; i < count; ++i)
      for (std::size_t j = i + 1; j < count; ++j)
        if (v[i] == v[j])
          n.items()[j].fail("repeated vertex " + std::to_string(i) + " and " + std::to_string(j) + " (both at [" +
                            format_number(v[i][0] / scale_) + ", " + format_number(v[i][1] / scale_) +
                            "]); each corner is listed once, and the polygon closes by itself");
    for (std::size_t i = 0; i < count; ++i)
      for (std::size_t j = i + 1; j < count; ++j) {
        const bool adjacent = j == i + 1 || (i == 0 && j == count - 1);
        if (!adjacent && segments_cross(v[i], v[(i + 1) % count], v[j], v[(j + 1) % count]))
          n.fail("polygon edges " + std::to_string(i) + " and " + std::to_string(j) +
                 " cross; the vertices must trace a simple polygon");
      }
    if (area2 == 0) n.fail("the polygon has zero area");
    check_width(n, xmax - xmin, px, "x");
    check_width(n, ymax - ymin, py, "y");
  }

  /// Default slice count: Δz ≤ λ/(40 n) in the layer's densest material at every wavelength, i.e. 20
  /// slices per half wavelength in the medium (docs/formulation.md §9: energy balance ~5e-4 there).
  /// The count is computed in double (a 1e12 nm film needs ~1e11 slices) and refused, at the layer's
  /// thickness, above max_layer_slices; then the stack's total is refused above max_total_slices.
  void assign_default_slices(const Node& layers) {
    for (std::size_t i = 0; i < c_.structure.layers.size(); ++i) {
      physics::Layer& layer = c_.structure.layers[i];
      if (layer.slices != 0) continue;
      const Densest d = densest(layer);
      const double slices = std::max(1.0, std::ceil(40.0 * layer.thickness * d.per_length - 1e-9));
      if (slices > double(max_layer_slices)) {
        std::ostringstream os;
        os << "the default slicing (Δz ≤ λ/(40 n), n = " << d.index << " at λ = " << d.wavelength
           << " nm) needs " << slices << " slices for this " << format_length(layer.thickness)
           << " layer, more than the limit of " << max_layer_slices
           << " per layer; give 'slices' (at most " << max_layer_slices << ") or a thinner layer";
        fail_at(c_.structure_source.layers[i].thickness, os.str());
      }
      layer.slices = int(slices);
    }
    long long total = 0;  // ≤ (layers) × max_layer_slices: no overflow in 64 bits
    for (const auto& layer : c_.structure.layers) total += layer.slices;
    if (total > max_total_slices)
      layers.fail("the " + std::to_string(c_.structure.layers.size()) + " layers have " + std::to_string(total) +
                  " slices in all, more than the limit of " + std::to_string(max_total_slices) +
                  "; give fewer or thinner layers, or fewer slices");
  }

  /// The densest material of a layer over the wavelengths, as max |n|/λ (per nm), with its n and λ.
  struct Densest {
    double per_length = 0, index = 0, wavelength = 0;
  };
  [[nodiscard]] Densest densest(const physics::Layer& layer) const {
    Densest d;
    for (const double w : c_.wavelength_nm) {
      double n = std::abs(layer.background.index(w));
      for (const auto& s : layer.shapes)
        for (const physics::Material* m : materials_of(s)) n = std::max(n, std::abs(m->index(w)));
      if (n / w > d.per_length) d = {n / w, n, w};
    }
    return d;
  }

  /// Slices given much thicker than the default rule (Δz ≤ λ/(40 n), assign_default_slices) leave the
  /// z-discretisation's O(Δz²) error far above the default's (docs/formulation.md §6): a warning beyond
  /// coarse_slicing_factor times the rule. Slices so thick that the highest order's field decays by more than
  /// e^−max_slice_decay across one (|Im kz| Δz, bounded by kρ of the highest order plus k1) are refused: the slice
  /// integrals (2 sin(kzΔz/2)/kz, physics/z_operator.cpp) overflow double precision near |Im kz| Δz = 1420, and
  /// the solve would end in NaN (found by an audit, session 36: a 2 µm film in one slice at M = 80).
  void check_slicing() {
    constexpr double coarse_slicing_factor = 10, max_slice_decay = 1000;
    constexpr double two_pi = 2 * std::numbers::pi;
    const physics::Lattice& lattice = c_.structure.lattice;
    const bool auto_harmonics = c_.numerics.accuracy && c_.numerics.accuracy->harmonics;
    const double gx = two_pi * c_.numerics.harmonics_x / lattice.period_x,
                 gy = lattice.one_dimensional() ? 0.0 : two_pi * c_.numerics.harmonics_y / lattice.period_y;
    double k1 = 0;  // the superstrate's largest wavenumber over the sweep
    for (const double w : c_.wavelength_nm)
      k1 = std::max(k1, two_pi * std::abs(c_.structure.superstrate.index(w)) / w);
    const double decay_per_length = std::hypot(gx, gy) + k1;
    for (std::size_t i = 0; i < c_.structure.layers.size(); ++i) {
      const physics::Layer& layer = c_.structure.layers[i];
      const LayerSource& source = c_.structure_source.layers[i];
      const double dz = layer.thickness / layer.slices;
      const bool given = source.slices.line > 0;
      if (!(decay_per_length * dz <= max_slice_decay)) {
        const double least = std::ceil(decay_per_length * layer.thickness / max_slice_decay);
        std::ostringstream os;
        os << std::setprecision(3) << "layer '" << source.name << "': its " << layer.slices << " slice(s) of "
           << format_length(dz) << " are too thick for " << (auto_harmonics ? "max_harmonics " : "harmonics ")
           << c_.numerics.harmonics_x << ": the field of the highest order decays by up to e^-"
           << decay_per_length * dz << " across one slice, beyond what the slice integrals hold in double precision (e^-"
           << int(max_slice_decay) << "); ";
        if (least <= double(max_layer_slices))
          os << "give at least " << least << " slices";
        else
          os << "that takes more than the limit of " << max_layer_slices << " slices: give fewer harmonics";
        fail_at(given ? source.slices : source.thickness, os.str());
      }
      if (!given) continue;
      const Densest d = densest(layer);
      const double rule = 1 / (40 * d.per_length);  // the default rule's largest Δz
      if (dz > coarse_slicing_factor * rule) {
        std::ostringstream os;
        os << source.slices.file << ':' << source.slices.line << ':' << source.slices.column << ": warning: layer '"
           << source.name << "': " << layer.slices << " slice(s) of " << format_length(dz) << " are "
           << std::setprecision(3) << dz / rule << " times thicker than the default rule Δz ≤ λ/(40 n) (n = "
           << d.index << " at " << format_length(d.wavelength) << ") asks: the z-discretisation's error may be far "
           << "above the harmonics' (omit 'slices' for the default count, " << std::ceil(layer.thickness / rule - 1e-9)
           << ", or use numerics.slices: auto)";
        c_.warnings.push_back(os.str());
      }
    }
  }

  // --- numerics and output --------------------------------------------------------------------
  void read_numerics(const Node& n) {
    const Map m(n, {"harmonics", "slices", "target_error", "max_harmonics", "max_slices", "richardson", "precision",
                    "formulation", "backend", "solver"});
    const Node h = m.required("harmonics");
    harmonics_node_ = h;
    constexpr int max_order = 4096;
    read_accuracy(m);
    if (c_.numerics.accuracy && c_.numerics.accuracy->harmonics) {
      const int most = c_.numerics.accuracy->max_harmonics;
      c_.numerics.harmonics_x = most;
      c_.numerics.harmonics_y = c_.structure.lattice.one_dimensional() ? 0 : most;
    } else if (h.is_sequence()) {
      const auto items = h.items();
      if (items.size() != 2)
        h.fail("expected [M1, M2] (highest orders along x and y), got a list of " + std::to_string(items.size()));
      c_.numerics.harmonics_x = integer_in(items[0], 0, max_order, "a highest order M1");
      c_.numerics.harmonics_y = integer_in(items[1], 0, max_order, "a highest order M2");
      if (c_.structure.lattice.one_dimensional() && c_.numerics.harmonics_y != 0)
        items[1].fail("a 1D grating (no lattice.period_y) has no y-harmonics: M2 must be 0 (or give one number)");
    } else {
      const int order = integer_in(h, 0, max_order, "a highest order M");
      c_.numerics.harmonics_x = order;
      c_.numerics.harmonics_y = c_.structure.lattice.one_dimensional() ? 0 : order;
    }
    if (const auto r = m.optional("richardson")) c_.numerics.richardson = r->boolean();
    if (const auto p = m.optional("precision"))
      c_.numerics.precision =
          p->choice<Precision>({{"single", Precision::single}, {"double", Precision::double_}});
    if (const auto f = m.optional("formulation"))
      c_.numerics.formulation = f->choice<physics::Formulation>(
          {{"normal-vector", physics::Formulation::normal_vector}, {"laurent", physics::Formulation::laurent}});
    if (const auto b = m.optional("backend")) {
      const std::string name = b->string();
      std::vector<std::string> names{"auto"};
      for (const auto backend : conv::all_backends) names.emplace_back(conv::to_string(backend));
      if (std::find(names.begin(), names.end(), name) == names.end())
        b->fail("unknown backend '" + name + "'" + yaml::suggestion(name, names));
      if (name != "auto") c_.numerics.backend = conv::parse_backend(name);
      const yaml::Location at = b->location();
      c_.numerics.backend_location = SourceLocation{at.file, at.line, at.column};
    }
    if (const auto s = m.optional("solver")) {
      const Map sm(*s, {"method", "restart", "tolerance", "max_iterations", "preconditioner"});
      auto& solver = c_.numerics.solver;
      if (const auto method = sm.optional("method"))
        solver.method = method->choice<physics::Method>({{"auto", physics::Method::automatic},
                                                         {"gmres", physics::Method::gmres},
                                                         {"bicgstab", physics::Method::bicgstab},
                                                         {"direct", physics::Method::dense_lu}});
      if (const auto r = sm.optional("restart")) {
        if (!sm.optional("method")) solver.method = physics::Method::gmres;  // a restart length asks for GMRES
        if (solver.method != physics::Method::gmres) r->fail("restart applies to method: gmres only");
        solver.restart = integer_in(*r, 1, 10000, "a GMRES restart length");
      }
      if (const auto t = sm.optional("tolerance")) {
        if (solver.method == physics::Method::dense_lu) t->fail("tolerance applies to the iterative methods only");
        solver.tolerance = t->number();
        if (solver.tolerance <= 0 || solver.tolerance >= 1)
          t->fail("the relative residual tolerance must lie in (0, 1), got " + t->describe());
      }
      if (const auto i = sm.optional("max_iterations")) {
        if (solver.method == physics::Method::dense_lu) i->fail("max_iterations applies to the iterative methods only");
        solver.max_iterations = integer_in(*i, 1, 10'000'000, "an iteration limit");
      }
      if (const auto pc = sm.optional("preconditioner")) {
        if (solver.method == physics::Method::dense_lu)
          pc->fail("preconditioner applies to the iterative methods only");
        solver.preconditioner = pc->choice<physics::Preconditioning>({{"auto", physics::Preconditioning::automatic},
                                                                       {"averaged", physics::Preconditioning::averaged},
                                                                       {"coarse", physics::Preconditioning::coarse},
                                                                       {"sweep", physics::Preconditioning::sweep},
                                                                       {"none", physics::Preconditioning::none}});
      }
    }
  }

  /// numerics.harmonics: auto, numerics.slices: auto and their target and maxima (AccuracyTarget).
  /// The default most harmonics: 100 on a 1D lattice, 20 on a 2D one ((2·20+1)² = 1681 harmonics);
  /// at least 9, so that the ladder from M = 4 has the two changes (4 → 6 → 9) agreement needs;
  /// the default most slices (8 × the layers' own) is set by finish_accuracy, once they are known.
  void read_accuracy(const Map& m) {
    const Node h = m.required("harmonics");
    const auto is_auto = [](const Node& n) { return n.is_scalar() && n.string() == "auto"; };
    AccuracyTarget a;
    a.harmonics = is_auto(h);
    if (const auto s = m.optional("slices")) {
      if (!is_auto(*s))
        s->fail("expected auto (the ladder of io/SCHEMA.md §1.7.1), got " + s->describe() +
                "; fixed slice counts are given per layer (layers[i].slices)");
      a.slices = true;
    }
    const auto target = m.optional("target_error");
    const auto most_harmonics = m.optional("max_harmonics");
    const auto most_slices = m.optional("max_slices");
    if (!a.harmonics && !a.slices) {
      for (const auto& given : {target, most_harmonics, most_slices})
        if (given) given->fail("applies with harmonics: auto or slices: auto only");
      return;
    }
    if (!target)
      m.node().fail("harmonics: auto and slices: auto need target_error, the largest accepted change of any "
                    "diffraction efficiency between two rungs (e.g. target_error: 1e-3)");
    a.target_error = target->number();
    if (!(a.target_error > 0 && a.target_error < 1))
      target->fail("expected an absolute error on efficiencies in (0, 1), e.g. 1e-3, got " + target->describe());
    if (most_harmonics && !a.harmonics) most_harmonics->fail("applies with harmonics: auto only");
    if (most_slices && !a.slices) most_slices->fail("applies with slices: auto only");
    // 0 for the one not raised (io/SCHEMA.md §2.2), as max_slices stays.
    a.max_harmonics = !a.harmonics       ? 0
                      : most_harmonics   ? integer_in(*most_harmonics, 9, 4096, "a highest order M for the ladder")
                      : c_.structure.lattice.one_dimensional() ? 100
                                                               : 20;
    if (most_slices) {
      a.max_slices = integer_in(*most_slices, 2, max_total_slices, "a most slices in all for the ladder");
      max_slices_node_ = most_slices;
    }
    c_.numerics.accuracy = a;
  }

  /// The ladder's most slices, once the layers' own (the first rung) are known: 8 × those by
  /// default (three doublings), capped at max_total_slices; a given max_slices must allow the two
  /// doublings that two changes, the least that can agree (io/accuracy.hpp), need.
  void finish_accuracy() {
    if (!c_.numerics.accuracy || !c_.numerics.accuracy->slices) return;
    AccuracyTarget& a = *c_.numerics.accuracy;
    const long long first = c_.total_slices();
    if (!max_slices_node_) {
      a.max_slices = int(std::min<long long>(8 * first, max_total_slices));
      if (a.max_slices < 4 * first)
        harmonics_node_->fail("slices: auto cannot double the layers' " + std::to_string(first) +
                              " slices twice within the limit of " + std::to_string(max_total_slices));
    } else if (a.max_slices < 4 * first) {
      max_slices_node_->fail("max_slices must allow two doublings of the layers' " + std::to_string(first) +
                             " slices (the ladder's first rung): at least " + std::to_string(4 * first));
    }
  }

  void read_output(const std::optional<Node>& n) {
    // on by default for single-point runs only, and never with accuracy on demand: the field
    // harmonics' shape depends on M and the slices, which then differ from point to point
    c_.output.fields = c_.points() == 1 && !c_.numerics.accuracy;
    std::optional<Node> planes;
    if (n) {
      const Map m(*n, {"fields", "planes"});
      if (const auto f = m.optional("fields")) c_.output.fields = f->boolean(), fields_node_ = f;
      if (c_.output.fields && c_.parameter_points() > 1)
        fields_node_->fail("fields with a parameter sweep are not stored (their shape depends on the slices, which "
                           "the parameters may change): give fields: false, or one value per parameter");
      if (c_.output.fields && c_.numerics.accuracy)
        fields_node_->fail("fields need fixed harmonics and slices (their shape depends on both, which "
                           "harmonics: auto and slices: auto choose per point): give fields: false, or numbers "
                           "for numerics.harmonics and layers[i].slices");
      planes = m.optional("planes");
      if (planes && !c_.output.fields) planes->fail("planes are field maps: they need fields: true");
    }
    if (!c_.output.fields) return;
    if (!planes) {
      c_.output.planes.push_back(FieldPlane{});  // xz at y = 0, 64 × 64
      return;
    }
    const auto items = planes->items();
    if (items.empty()) planes->fail("an empty list of planes: omit 'planes' for the default xz cut");
    for (const auto& item : items) {
      plane_nodes_.push_back(item);
      const Map m(item, {"plane", "at", "points"});
      FieldPlane plane;
      plane.kind =
          m.required("plane").choice<PlaneKind>({{"xz", PlaneKind::xz}, {"yz", PlaneKind::yz}, {"xy", PlaneKind::xy}});
      if (const auto at = m.optional("at")) {
        plane.position_nm = at->number() * scale_;
        const double h = c_.total_thickness_nm();
        const double half =
            plane.kind == PlaneKind::yz ? c_.structure.lattice.period_x / 2 : c_.structure.lattice.period_y / 2;
        if (plane.kind == PlaneKind::xy && (plane.position_nm < 0 || plane.position_nm > h))
          at->fail("an xy plane must lie in the patterned region, z in [0, " + format_length(h) + "]");
        if (plane.kind != PlaneKind::xy && half > 0 && std::abs(plane.position_nm) > half)
          at->fail("the cut must lie in the unit cell, within ±" + format_length(half));
      }
      if (plane.kind != PlaneKind::xz && c_.structure.lattice.one_dimensional())
        m.required("plane").fail("a 1D grating is invariant along y: its field maps are xz cuts");
      if (plane.kind == PlaneKind::xy) plane.points_second = 64;
      if (const auto p = m.optional("points")) {
        if (plane.kind == PlaneKind::xy) {
          const auto counts = p->items();
          if (counts.size() != 2) p->fail("an xy map takes [points along x, points along y]");
          plane.points_first = integer_in(counts[0], 2, 4096, "a number of map points");
          plane.points_second = integer_in(counts[1], 2, 4096, "a number of map points");
        } else {
          if (!p->is_scalar())
            p->fail("an xz or yz map takes one number: points across the period (vertically: the slice centres)");
          plane.points_first = integer_in(*p, 2, 4096, "a number of map points");
        }
      }
      c_.output.planes.push_back(plane);
    }
  }

  /// What the physics library itself refuses (e.g. a sloped polygon whose edges vanish within its
  /// layer), found now rather than at the first solve.
  void check_structure(const Node& layers) const {
    try {
      (void)physics::discretise(c_.structure);
    } catch (const InvalidArgument& e) {
      layers.fail(e.what());
    }
  }

  void check_memory(const Node& layers) const {
    const double needed = double(estimated_solver_bytes(c_));
    const double available = double(host_memory_bytes());
    if (available > 0 && needed > available) {
      std::ostringstream os;
      const auto& a = c_.numerics.accuracy;
      os << "harmonics [" << c_.numerics.harmonics_x << ", " << c_.numerics.harmonics_y << "] with "
         << (a && a->slices ? a->max_slices : c_.total_slices()) << " slices need about " << format_gib(needed)
         << " to solve one wavelength, more than "
         << (host_memory_is_group_limit() ? "the " + format_gib(available) + " of memory this process may use (its control group's limit)"
                                           : "this machine's " + format_gib(available) + " of memory");
      if (a) os << " (harmonics: auto and slices: auto are checked at their max_harmonics and max_slices)";
      harmonics_node_->fail(os.str());
    }
    // The stored fields of a point: the harmonics, P × Nz × 3 × Nm complex values, and each field map,
    // P × 3 × N1 × N2 (N2 the slices of an xz or yz cut), synthesised in memory (io::to_point_result)
    // and written as one HDF5 chunk (io/SCHEMA.md §2.2), which HDF5 limits to 4 GiB. Counted in
    // double; a map is also refused above a quarter of the memory (the solve's fields are in `needed`).
    if (!c_.output.fields) return;
    constexpr double max_chunk = double(4ull << 30) - 1;
    const double slices = double(c_.total_slices()) * (c_.numerics.richardson ? 2 : 1);
    const double orders = double(2 * c_.numerics.harmonics_x + 1) * double(2 * c_.numerics.harmonics_y + 1);
    if (const double bytes = double(c_.polarizations()) * slices * 3 * orders * 16; bytes > max_chunk) {
      std::ostringstream os;
      os << "the field harmonics of one sweep point (" << slices << " slices × 3 components × " << orders
         << " orders × " << c_.polarizations() << " polarisation(s)) take " << format_gib(bytes)
         << ", more than the 4 GiB HDF5 stores in one chunk; give fields: false, fewer slices or harmonics";
      (fields_node_ ? *fields_node_ : layers).fail(os.str());
    }
    const double map_limit = available > 0 ? std::min(max_chunk, available / 4) : max_chunk;
    for (std::size_t i = 0; i < c_.output.planes.size(); ++i) {
      const FieldPlane& plane = c_.output.planes[i];
      const double second = plane.kind == PlaneKind::xy ? double(plane.points_second) : slices;
      const double bytes = double(c_.polarizations()) * 3 * double(plane.points_first) * second * 16;
      if (bytes > map_limit) {
        std::ostringstream os;
        os << (i < plane_nodes_.size() ? "this" : "the default") << " field map is " << plane.points_first << " × "
           << second << " points × 3 components × " << c_.polarizations() << " polarisation(s): " << format_gib(bytes)
           << " per sweep point, more than " << format_gib(map_limit)
           << " (the smaller of 4 GiB, HDF5's chunk limit, and a quarter of this machine's " << format_gib(available)
           << "); give fewer points (or slices)";
        if (i < plane_nodes_.size()) plane_nodes_[i].fail(os.str());
        layers.fail(os.str() + ", or output: {fields: false} (the default xz map has the layers' slices)");
      }
    }
  }

  /// A case is UTF-8 text without NUL bytes (YAML 1.2; the text is stored as a UTF-8 string in the
  /// result file): anything else is refused at the first offending byte's line and column (1-based,
  /// counted in bytes). yaml-cpp 0.7 can also spin for minutes on NUL bytes (a fuzzed case did).
  void refuse_non_utf8() const {
    const std::string& t = text_;
    int line = 1, column = 1;
    for (std::size_t i = 0; i < t.size();) {
      const auto b = static_cast<unsigned char>(t[i]);
      std::size_t length = b < 0x80 ? 1 : (b & 0xE0) == 0xC0 ? 2 : (b & 0xF0) == 0xE0 ? 3 : (b & 0xF8) == 0xF0 ? 4 : 0;
      bool valid = length != 0 && b != 0 && i + length <= t.size();
      for (std::size_t k = 1; valid && k < length; ++k) valid = (static_cast<unsigned char>(t[i + k]) & 0xC0) == 0x80;
      if (valid && length == 2) valid = b >= 0xC2;  // no overlong encodings
      if (!valid)
        throw CaseError(file_, line, column,
                        b == 0 ? std::string("a NUL byte: a case file is UTF-8 text")
                               : "byte 0x" + std::string(1, "0123456789abcdef"[b >> 4]) +
                                     std::string(1, "0123456789abcdef"[b & 15]) +
                                     " is not UTF-8: a case file is UTF-8 text (save it as UTF-8, e.g. iconv -f latin1 -t utf-8)");
      if (b == '\n') ++line, column = 1;
      else ++column;
      i += length;
    }
  }

  /// yaml-cpp 0.7 never returns (allocating without end) on a flow separator ',' where its block
  /// parser expects a node: at the start of a line, after node properties (!tag, &anchor), a block-
  /// scalar header (|, >), a '---' marker, or a flow collection that has ended (found by the fuzzer:
  /// ",# ", "!,!:", "[,!:,],!:,"; by hand: "&a ,", "--- ,", "|\n,"). A ',' outside [ ] and { } is
  /// legitimate in a case only inside text (a description) and quoted strings, so those contexts are
  /// refused here, located, before yaml-cpp sees the text. The scan follows quotes, comments and the
  /// nesting of flow collections that open a node; '[' and '{' inside plain text are text.
  void refuse_stray_commas() const {
    const std::string& t = text_;
    int depth = 0, line = 1, column = 0;
    char quote = 0;
    std::size_t line_start = 0, last_flow_close = std::string::npos;
    for (std::size_t i = 0; i < t.size(); ++i) {
      const char c = t[i];
      ++column;
      if (c == '\n') {
        ++line, column = 0, line_start = i + 1;
        if (quote == 0) continue;
      }
      if (quote != 0) {  // inside '...' ('' escapes) or "..." (\ escapes); may span lines
        if (quote == '"' && c == '\\') ++i, ++column;
        else if (c == quote && !(quote == '\'' && i + 1 < t.size() && t[i + 1] == '\'')) quote = 0;
        else if (c == quote) ++i, ++column;
        continue;
      }
      // The previous non-blank character on this line, and the blank-delimited word ending there.
      std::size_t j = i;
      while (j > line_start && (t[j - 1] == ' ' || t[j - 1] == '\t')) --j;
      const bool first_on_line = j == line_start;
      const char before = first_on_line ? '\0' : t[j - 1];
      const bool node_start = first_on_line || std::string_view(":-?,[{").find(before) != std::string_view::npos;
      if (c == '#' && (i == line_start || t[i - 1] == ' ' || t[i - 1] == '\t')) {
        while (i + 1 < t.size() && t[i + 1] != '\n') ++i, ++column;
        continue;
      }
      if ((c == '\'' || c == '"') && (node_start || depth > 0)) {
        quote = c;
        continue;
      }
      if ((c == '[' || c == '{') && (node_start || depth > 0)) {
        ++depth;
        continue;
      }
      if ((c == ']' || c == '}') && depth > 0) {
        if (--depth == 0) last_flow_close = i;
        continue;
      }
      if (c != ',' || depth > 0) continue;
      std::size_t w = j;
      while (w > line_start && t[w - 1] != ' ' && t[w - 1] != '\t') --w;
      const std::string_view word(t.data() + w, j - w);
      const bool after_flow = !first_on_line && last_flow_close == j - 1;
      const bool after_property =
          !word.empty() && (word[0] == '!' || word[0] == '&' || word == "---" ||
                            ((word[0] == '|' || word[0] == '>') &&
                             word.find_first_not_of("|>+-0123456789") == std::string_view::npos));
      if (first_on_line || after_flow || after_property)
        throw CaseError(file_, line, column,
                        std::string("invalid YAML: ',' ") +
                            (first_on_line ? "at the start of a line"
                             : after_flow  ? "after a closed [ ] or { }"
                                           : "after '" + std::string(word) + "'") +
                            ", outside [ ] and { }; quote text that contains it");
    }
  }

  std::string file_, base_;
  const std::vector<double>* point_;  // the parameter axes' values to read at (null: their first)
  yaml::Substitution substitution_;
  Case c_;
  std::string text_;  // c_.yaml as parsed: lone CRs made LF
  double scale_ = 1;
  std::optional<Node> harmonics_node_;
  std::string superstrate_;            // the superstrate's material name
  std::vector<Node> plane_nodes_;      // per output plane given (none for the default plane)
  std::optional<Node> fields_node_;    // output.fields, when given
  std::optional<Node> max_slices_node_;  // numerics.max_slices, when given
  std::map<std::string, Node> defined_, used_;  // first definition / first use of each material
};

/// The case's `fit` section (io/SCHEMA.md §3.3), read by io::read_fit_settings (which locates its own
/// errors); every floating parameter must be one of the case's parameter axes: a computed parameter
/// follows from the others and cannot float. `run` and `validate` check the section and ignore it.
void check_fit_section(const Case& c) {
  const FitSettings fit = read_fit_settings(c.yaml, c.path);
  for (const FitParameterSetting& setting : fit.parameters) {
    const std::string& name = setting.parameter.name;
    if (std::any_of(c.parameters.begin(), c.parameters.end(), [&](const ParameterAxis& a) { return a.name == name; }))
      continue;
    std::string declared;
    for (const ParameterAxis& a : c.parameters) declared += (declared.empty() ? "" : ", ") + a.name;
    const bool derived = std::any_of(c.derived_parameters.begin(), c.derived_parameters.end(),
                                     [&](const DerivedParameter& d) { return d.name == name; });
    throw CaseError(setting.at.file, setting.at.line, setting.at.column,
                    "fit.parameters: '" + name + "' " +
                        (derived ? "is computed from other parameters and cannot float"
                                 : "is not a parameter of the case") +
                        (declared.empty() ? std::string(" (the case declares no parameters: add them under 'parameters')")
                                          : " (the case's parameters: " + declared + ")"));
  }
}

}  // namespace

Case parse_case(std::string_view yaml, const std::string& name, const std::string& base_directory) {
  Case c = CaseReader(yaml, name, base_directory).read();
  check_fit_section(c);
  // Every other point of the parameter sweep read and checked too, before anything is solved.
  for (std::size_t index = 1; index < c.parameter_points(); ++index) (void)case_at(c, c.parameter_point(index));
  return c;
}

Case case_at(const Case& c, std::span<const double> values) {
  GS_EXPECTS(values.size() == c.parameters.size(), "a parameter point needs " + std::to_string(c.parameters.size()) +
                                                      " values, one per axis; got " + std::to_string(values.size()));
  const std::vector<double> point(values.begin(), values.end());
  Case at = CaseReader(c.yaml, c.path, c.base_directory, &point).read();
  at.inputs = c.inputs;  // load_case's list: the case file first
  return at;
}

std::vector<physics::Structure> structures_at(const Case& c, const std::vector<std::vector<double>>& values) {
  std::vector<physics::Structure> structures;
  structures.reserve(values.size());
  for (const auto& v : values) structures.push_back(case_at(c, v).structure);
  return structures;
}

Case load_case(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in || !std::filesystem::is_regular_file(path))
    throw CaseError(path, 0, 0, "cannot read the case file (missing, unreadable or not a file)");
  std::ostringstream text;
  text << in.rdbuf();
  std::string base = std::filesystem::path(path).parent_path().string();
  if (base.empty()) base = ".";
  Case c = parse_case(text.str(), path, base);
  c.inputs.insert(c.inputs.begin(), path);
  return c;
}

}  // namespace gratingsim::io
