// gratingsim._core: the Python binding (pybind11) of cases, structures, solves and result files.
// Thin by design: the structs are physics/'s and io/'s own, a solve is app/solving.hpp's
// solve_for_file per unit of work (app/work_units.hpp: what `gratingsim run` does with one worker), result arrays are
// named and shaped by io/result_fields.hpp's table, and files are written by io::ResultWriter. The
// pure-Python part of the package (gratingsim/__init__.py) adds cases from dicts.
#include <pybind11/complex.h>
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>
#include <pybind11/stl_bind.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <complex>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <type_traits>
#include <variant>
#include <vector>

#include "app/output_safety.hpp"
#include "app/solving.hpp"
#include "app/work_units.hpp"
#include "convolution/devices.hpp"
#include "core/config.hpp"
#include "io/problem.hpp"
#include "io/result_fields.hpp"
#include "io/results.hpp"
#include "io/versions.hpp"

namespace py = pybind11;
using namespace gratingsim;

PYBIND11_MAKE_OPAQUE(std::vector<physics::Layer>)

namespace {

/// A solved case: the problem as solved (backend and precision set), and every point's result in
/// point order (io::ResultLayout::point_index), as `gratingsim run` stores them.
struct Solution {
  io::Problem problem;
  std::string backend, device;
  std::vector<io::PointResult> points;
  std::vector<std::string> warnings;  ///< the precision's and the solver's, said once each
  double seconds = 0;                 ///< wall time of the whole solve
  py::object arrays;                  ///< result_arrays(), made on first use (with the GIL held)
};

/// Solves every point of `source`: per unit of work (one wavelength, or several on a GPU:
/// app::plan_units for one worker), app::solve_for_file on its points (one batched solve, or the
/// accuracy ladder), the path of `gratingsim run` with one worker. `backend`: a
/// backend's name, "auto" or none (the case's numerics.backend, else auto); `precision`: "single",
/// "double" or none (the case's). Runs without the GIL.
Solution solve_case(io::Case source, std::optional<std::string> backend, std::optional<std::string> precision) {
  Solution s;
  s.problem = io::make_problem(std::move(source));
  const std::optional<Precision> chosen =
      precision ? std::optional(parse_precision(*precision)) : std::optional<Precision>();
  if (std::string warning = app::apply_precision(s.problem.solver, chosen); !warning.empty())
    s.warnings.push_back(std::move(warning));
  std::optional<conv::Backend> named = s.problem.source.numerics.backend;
  if (backend) named = *backend == "auto" ? std::nullopt : std::optional(conv::parse_backend(*backend));
  s.problem.solver.backend = named ? *named : app::automatic_backend(s.problem);
  s.backend = std::string(conv::to_string(s.problem.solver.backend));
  const std::string why =
      app::physics_unavailable(s.problem.solver.backend, s.problem.solver.precision, s.problem.solver.formulation);
  if (!why.empty()) throw Unsupported("backend " + s.backend + " cannot run the solver here: " + why);
  s.device = app::device_of(s.problem.solver.backend);

  const auto start = std::chrono::steady_clock::now();
  s.points.resize(s.problem.layout.points());
  for (const app::Unit& points : app::plan_units(s.problem, [](std::size_t) { return false; }, 1)) {
    io::SolvedPoints solved = app::solve_for_file(s.problem, points);
    for (std::size_t j = 0; j < points.size(); ++j) s.points[points[j]] = std::move(solved.results[j]);
    for (std::string& w : solved.warnings)
      if (std::find(s.warnings.begin(), s.warnings.end(), w) == s.warnings.end()) s.warnings.push_back(std::move(w));
  }
  s.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return s;
}

/// Writes `s` as the result file `gratingsim run` writes (io/SCHEMA.md): under the output's lock,
/// OUT.h5.partial point by point, each wavelength's writing time recorded as the CLI records it,
/// then renamed to OUT.h5. Refused before anything is written, as `run` refuses (app/output_safety.hpp), where it
/// would destroy a file: the case file or a table it reads, a directory or a device, an existing OUT.h5 without
/// `overwrite`.
void write_solution(const Solution& s, const std::string& path, bool overwrite) {
  const std::vector<std::string> companions{io::partial_path(path), io::lock_path(path)};
  const auto check = [&] {
    app::check_output_path(path, companions, s.problem.source.inputs, overwrite, "a file the case reads", "overwrite=True");
  };
  check();
  const io::OutputLock lock(path);
  check();  // again under the lock, as run checks: another writer may have finished meanwhile
  io::ResultWriter writer = io::ResultWriter::create(
      path, s.problem.layout,
      io::run_info(s.problem, s.backend, std::string(to_string(s.problem.solver.precision)), s.device));
  for (std::size_t batch = 0; batch < s.problem.layout.batches(); ++batch) {
    const std::vector<std::size_t> points = io::points_of_batch(s.problem, batch);
    const auto start = std::chrono::steady_clock::now();
    for (std::size_t point : points) writer.write(point, s.points[point]);
    writer.record_writing(points, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  writer.finish(overwrite);
}

// --- Results as NumPy arrays -----------------------------------------------------------------------

template <class T>
struct element_of {
  using type = T;
};
template <class T>
struct element_of<std::vector<T>> {
  using type = T;
};
template <class T, std::size_t N>
struct element_of<std::array<T, N>> {
  using type = T;
};
template <class T>
struct element_of<std::vector<std::vector<T>>> {
  using type = T;
};

/// The values of one point's member (map `map` of field_maps) as a span.
template <class M>
auto values_of(const M& member, std::size_t map) {
  using E = typename element_of<M>::type;
  if constexpr (std::is_same_v<M, std::vector<std::vector<E>>>)
    return std::span<const E>(member.at(map));
  else if constexpr (std::is_arithmetic_v<M>)
    return std::span<const E>(&member, 1);
  else
    return std::span<const E>(member);
}

/// Every per-point dataset of the solution's result file (io::result_datasets, `done` aside), by its
/// path in the file, shaped [N_1]…[N_K][Nw][Nθ][Nφ] (the parameter axes first) + its own dimensions; complex values as complex128 (the file
/// stores them with a trailing dimension of 2 instead). Then the axes: sweep/*, orders, and with
/// fields fields/slice_z, fields/harmonic_index and each map's first and second coordinates.
py::dict make_result_arrays(const Solution& s) {
  const io::ResultLayout& layout = s.problem.layout;
  py::dict arrays;
  for (const io::ResultDataset& d : io::result_datasets(layout)) {
    std::vector<py::ssize_t> shape;
    for (const auto& p : layout.parameters) shape.push_back(py::ssize_t(p.values.size()));
    shape.insert(shape.end(), {py::ssize_t(layout.wavelength_nm.size()), py::ssize_t(layout.theta_deg.size()),
                               py::ssize_t(layout.phi_deg.size())});
    for (std::size_t n : d.tail) shape.push_back(py::ssize_t(n));
    if (d.field->kind == io::ElementKind::c128) shape.pop_back();  // (re, im): one complex128
    const std::size_t n = d.values();
    std::visit(
        [&](auto source) {
          using Source = decltype(source);
          if constexpr (std::is_same_v<Source, io::DoneFlag>) {
            return;
          } else if constexpr (std::is_same_v<Source, io::MapMagnitude>) {
            // |E| = sqrt(|Ex|² + |Ey|² + |Ez|²) from field_maps[K] [P][3][cells], as the writer computes it
            py::array_t<double> a(shape);
            double* out = a.mutable_data();
            const std::size_t P = std::size_t(layout.polarizations()), cells = n / P;
            for (const io::PointResult& r : s.points) {
              const std::vector<std::complex<double>>& e = r.field_maps.at(d.map);
              for (std::size_t i = 0; i < P; ++i)
                for (std::size_t c = 0; c < cells; ++c) {
                  double sum = 0;
                  for (std::size_t comp = 0; comp < 3; ++comp) sum += std::norm(e[(i * 3 + comp) * cells + c]);
                  *out++ = std::sqrt(sum);
                }
            }
            arrays[py::str(d.path)] = a;
          } else {
            using Member = std::remove_cvref_t<decltype(std::declval<const io::PointResult&>().*source)>;
            using E = typename element_of<Member>::type;
            py::array_t<E> a(shape);
            E* out = a.mutable_data();
            for (const io::PointResult& r : s.points) {
              const auto values = values_of(r.*source, d.map);
              GS_EXPECTS(values.size() == n, std::string(d.field->member) + " has " + std::to_string(values.size()) +
                                                 " values, the layout needs " + std::to_string(n));
              out = std::copy(values.begin(), values.end(), out);
            }
            arrays[py::str(d.path)] = a;
          }
        },
        d.field->source);
  }
  for (const auto& p : layout.parameters)
    arrays[py::str("sweep/" + p.name)] = py::array_t<double>(py::ssize_t(p.values.size()), p.values.data());
  arrays["sweep/wavelength"] = py::array_t<double>(py::ssize_t(layout.wavelength_nm.size()), layout.wavelength_nm.data());
  arrays["sweep/theta"] = py::array_t<double>(py::ssize_t(layout.theta_deg.size()), layout.theta_deg.data());
  arrays["sweep/phi"] = py::array_t<double>(py::ssize_t(layout.phi_deg.size()), layout.phi_deg.data());
  py::array_t<std::int32_t> orders({py::ssize_t(layout.orders.size()), py::ssize_t(2)});
  for (std::size_t o = 0; o < layout.orders.size(); ++o)
    for (std::size_t k = 0; k < 2; ++k) orders.mutable_at(o, k) = layout.orders[o][k];
  arrays["orders"] = orders;
  if (layout.fields) {
    arrays["fields/slice_z"] = py::array_t<double>(py::ssize_t(layout.slice_center_nm.size()), layout.slice_center_nm.data());
    py::array_t<std::int32_t> index({py::ssize_t(layout.harmonics_count()), py::ssize_t(2)});
    py::ssize_t row = 0;
    for (int m1 = -layout.harmonics_x; m1 <= layout.harmonics_x; ++m1)  // m1 slow, m2 fast
      for (int m2 = -layout.harmonics_y; m2 <= layout.harmonics_y; ++m2, ++row) {
        index.mutable_at(row, 0) = m1;
        index.mutable_at(row, 1) = m2;
      }
    arrays["fields/harmonic_index"] = index;
    for (std::size_t k = 0; k < layout.maps.size(); ++k) {
      const io::MapLayout& map = layout.maps[k];
      const std::string prefix = "fields/map_" + std::to_string(k) + "/";
      arrays[py::str(prefix + "first")] = py::array_t<double>(py::ssize_t(map.first_nm.size()), map.first_nm.data());
      arrays[py::str(prefix + "second")] = py::array_t<double>(py::ssize_t(map.second_nm.size()), map.second_nm.data());
    }
  }
  for (const auto item : arrays) item.second.attr("setflags")(py::arg("write") = false);  // shared by every call
  return arrays;
}

/// The arrays of `s`, made once: read-only, so that every caller sees the solve's values.
py::dict result_arrays(Solution& s) {
  if (!s.arrays) s.arrays = make_result_arrays(s);
  return s.arrays.cast<py::dict>();
}

// --- gratingsim.info() -----------------------------------------------------------------------------

py::dict info() {
  py::dict d;
  d["version"] = GRATINGSIM_VERSION;
  const conv::CudaReport cuda = conv::cuda_report();
  d["cuda_built"] = cuda.built;
  py::list devices;
  for (const conv::CudaDevice& device : cuda.devices) {
    py::dict one;
    one["index"] = device.index;
    one["name"] = device.name;
    one["compute_capability"] = std::to_string(device.major) + "." + std::to_string(device.minor);
    one["memory_bytes"] = device.global_memory_bytes;
    devices.append(one);
  }
  d["cuda_devices"] = devices;
  d["host_cpu"] = conv::describe(conv::host_cpu());
  // Per backend: "available" when the physics solver runs it here (a one-slice solve in double
  // precision, app::physics_unavailable), else why not.
  py::dict backends;
  for (conv::Backend b : conv::all_backends) {
    const std::string why = app::physics_unavailable(b, Precision::double_);
    backends[py::str(std::string(conv::to_string(b)))] = why.empty() ? std::string("available") : why;
  }
  d["backends"] = backends;
  const io::LibraryVersions versions = io::library_versions();
  d["libraries"] = py::dict(py::arg("fftw") = conv::fftw_version(), py::arg("hdf5") = versions.hdf5,
                            py::arg("yaml_cpp") = versions.yaml_cpp, py::arg("libpng") = versions.libpng,
                            py::arg("pybind11") = std::to_string(PYBIND11_VERSION_MAJOR) + "." +
                                                                         std::to_string(PYBIND11_VERSION_MINOR) + "." +
                                                                         std::to_string(PYBIND11_VERSION_PATCH));
  return d;
}

// --- Exceptions ------------------------------------------------------------------------------------

/// gratingsim.Error (every error of the library) and gratingsim.CaseError (an error in a case, located;
/// also a ValueError): created once, alive as long as the interpreter (never released: module state).
PyObject* error_type = nullptr;
PyObject* case_error_type = nullptr;

void register_exceptions(py::module_& m) {
  error_type = PyErr_NewExceptionWithDoc("gratingsim.Error", "An error of gratingsim (the message is the CLI's).",
                                         PyExc_RuntimeError, nullptr);
  py::tuple bases = py::make_tuple(py::handle(error_type), py::handle(PyExc_ValueError));
  case_error_type = PyErr_NewExceptionWithDoc(
      "gratingsim.CaseError",
      "An error in a case (YAML file or dict), located: attributes file, line, column (1-based, as editors "
      "count; 0 when no place applies) and message; for a dict also path, the key path of the offending value.",
      bases.ptr(), nullptr);
  m.add_object("Error", py::handle(error_type));
  m.add_object("CaseError", py::handle(case_error_type));
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const io::CaseError& e) {
      py::object exc = py::reinterpret_borrow<py::object>(case_error_type)(e.what());
      exc.attr("file") = e.file();
      exc.attr("line") = e.line();
      exc.attr("column") = e.column();
      exc.attr("message") = e.message();
      exc.attr("path") = py::none();
      PyErr_SetObject(case_error_type, exc.ptr());
    } catch (const Error& e) {
      PyErr_SetString(error_type, e.what());
    }
  });
}

/// A path given as str or os.PathLike (pathlib.Path), as Python's own file functions take it.
std::string path_text(const py::object& path) {
  return py::module_::import("os").attr("fspath")(path).cast<std::string>();
}

// --- Structures ------------------------------------------------------------------------------------

/// A read-write property of `cls` holding a list of objects, returned as a new list of copies: def_readwrite made
/// its elements references into the vector, which dangled once the vector was replaced or grew (an audit in
/// session 36 read a shape's width as -3.4e33 after its layer's shapes were assigned anew). A list is changed by
/// assigning a new one.
template <class C, class V>
void copied_list(py::class_<C>& cls, const char* name, V C::*member) {
  cls.def_property(
      name, [member](const C& c) { return c.*member; }, [member](C& c, V value) { c.*member = std::move(value); });
}

/// structure.layers[i]: layer i of the structure's list, by index, read anew at every access, so that it stays valid
/// when the list grows or is replaced (bind_vector's item was a reference into the vector's storage: after an
/// append it read a thickness of 9.7e-320, an audit of session 36). Holds the list, which holds the structure.
struct LayerView {
  py::object list;
  std::vector<physics::Layer>* layers = nullptr;
  std::size_t index = 0;
  [[nodiscard]] physics::Layer& get() const {
    if (index >= layers->size())
      throw py::index_error("layer " + std::to_string(index) + " is no longer in its list (" +
                            std::to_string(layers->size()) + " layers now)");
    return (*layers)[index];
  }
};

void bind_structures(py::module_& m) {
  using namespace physics;
  py::class_<Material>(m, "Material", "A material model (lengths in nm): ε(λ). Default: vacuum.")
      .def(py::init<>())
      .def_static("constant_index", &Material::constant_index, py::arg("index"), py::arg("name") = "")
      .def_static("constant_permittivity", &Material::constant_permittivity, py::arg("permittivity"),
                  py::arg("name") = "")
      .def_static("tabulated", &Material::tabulated, py::arg("name"), py::arg("wavelength_nm"), py::arg("n"),
                  py::arg("kappa"))
      .def("permittivity", &Material::permittivity, py::arg("wavelength_nm"))
      .def("index", &Material::index, py::arg("wavelength_nm"))
      .def_property_readonly("name", &Material::name)
      .def("__repr__", [](const Material& x) { return "<gratingsim.Material " + x.name() + ">"; });
  py::class_<Point>(m, "Point")
      .def(py::init<double, double>(), py::arg("x") = 0.0, py::arg("y") = 0.0)
      .def_readwrite("x", &Point::x)
      .def_readwrite("y", &Point::y);
  py::class_<Lattice>(m, "Lattice",
                      "Periods (nm); period_y = 0: a 1D grating, which rotation_deg (degrees) turns "
                      "counter-clockwise about +z (its grating vector at rotation_deg from the x axis).")
      .def(py::init<double, double, double>(), py::arg("period_x") = 0.0, py::arg("period_y") = 0.0,
           py::arg("rotation_deg") = 0.0)
      .def_readwrite("period_x", &Lattice::period_x)
      .def_readwrite("period_y", &Lattice::period_y)
      .def_readwrite("rotation_deg", &Lattice::rotation_deg);
  // Shapes: physics/structure.hpp's structs, keyword constructors with its member names.
  py::class_<Rectangle>(m, "Rectangle")
      .def(py::init([](Point center, double width_x, double width_y, Material material) {
             return Rectangle{center, width_x, width_y, std::move(material)};
           }),
           py::arg("center") = Point{}, py::arg("width_x") = 0.0, py::arg("width_y") = 0.0,
           py::arg("material") = Material{})
      .def_readwrite("center", &Rectangle::center)
      .def_readwrite("width_x", &Rectangle::width_x)
      .def_readwrite("width_y", &Rectangle::width_y)
      .def_readwrite("material", &Rectangle::material);
  py::class_<Ellipse>(m, "Ellipse")
      .def(py::init([](Point center, double a, double b, double rotation_deg, Material material) {
             return Ellipse{center, a, b, rotation_deg, std::move(material)};
           }),
           py::arg("center") = Point{}, py::arg("semi_axis_x") = 0.0, py::arg("semi_axis_y") = 0.0,
           py::arg("rotation_deg") = 0.0, py::arg("material") = Material{})
      .def_readwrite("center", &Ellipse::center)
      .def_readwrite("semi_axis_x", &Ellipse::semi_axis_x)
      .def_readwrite("semi_axis_y", &Ellipse::semi_axis_y)
      .def_readwrite("rotation_deg", &Ellipse::rotation_deg)
      .def_readwrite("material", &Ellipse::material);
  py::class_<Polygon> polygon(m, "Polygon");
  polygon
      .def(py::init([](std::vector<Point> vertices, Material material) { return Polygon{std::move(vertices), std::move(material)}; }),
           py::arg("vertices") = std::vector<Point>{}, py::arg("material") = Material{})
      .def_readwrite("material", &Polygon::material);
  copied_list(polygon, "vertices", &Polygon::vertices);
  py::class_<Raster> raster(m, "Raster");
  raster
      .def(py::init([](int nx, int ny, std::vector<int> pixels, std::vector<Material> materials) {
             return Raster{nx, ny, std::move(pixels), std::move(materials)};
           }),
           py::arg("nx") = 0, py::arg("ny") = 0, py::arg("pixels") = std::vector<int>{},
           py::arg("materials") = std::vector<Material>{})
      .def_readwrite("nx", &Raster::nx)
      .def_readwrite("ny", &Raster::ny)
      .def_readwrite("pixels", &Raster::pixels);
  copied_list(raster, "materials", &Raster::materials);
  py::class_<TrapezoidLine>(m, "TrapezoidLine")
      .def(py::init([](double center_x, double bottom_width, double angle, Material material) {
             return TrapezoidLine{center_x, bottom_width, angle, std::move(material)};
           }),
           py::arg("center_x") = 0.0, py::arg("bottom_width") = 0.0, py::arg("sidewall_angle_deg") = 90.0,
           py::arg("material") = Material{})
      .def_readwrite("center_x", &TrapezoidLine::center_x)
      .def_readwrite("bottom_width", &TrapezoidLine::bottom_width)
      .def_readwrite("sidewall_angle_deg", &TrapezoidLine::sidewall_angle_deg)
      .def_readwrite("material", &TrapezoidLine::material);
  py::class_<SlopedPolygon>(m, "SlopedPolygon")
      .def(py::init([](Polygon bottom, double angle) { return SlopedPolygon{std::move(bottom), angle}; }),
           py::arg("bottom") = Polygon{}, py::arg("sidewall_angle_deg") = 90.0)
      .def_readwrite("bottom", &SlopedPolygon::bottom)
      .def_readwrite("sidewall_angle_deg", &SlopedPolygon::sidewall_angle_deg);
  py::class_<TaperedEllipse>(m, "TaperedEllipse")
      .def(py::init([](Point center, double bx, double by, double tx, double ty, double rotation, Material material) {
             return TaperedEllipse{center, bx, by, tx, ty, rotation, std::move(material)};
           }),
           py::arg("center") = Point{}, py::arg("bottom_semi_axis_x") = 0.0, py::arg("bottom_semi_axis_y") = 0.0,
           py::arg("top_semi_axis_x") = 0.0, py::arg("top_semi_axis_y") = 0.0, py::arg("rotation_deg") = 0.0,
           py::arg("material") = Material{})
      .def_readwrite("center", &TaperedEllipse::center)
      .def_readwrite("bottom_semi_axis_x", &TaperedEllipse::bottom_semi_axis_x)
      .def_readwrite("bottom_semi_axis_y", &TaperedEllipse::bottom_semi_axis_y)
      .def_readwrite("top_semi_axis_x", &TaperedEllipse::top_semi_axis_x)
      .def_readwrite("top_semi_axis_y", &TaperedEllipse::top_semi_axis_y)
      .def_readwrite("rotation_deg", &TaperedEllipse::rotation_deg)
      .def_readwrite("material", &TaperedEllipse::material);
  py::class_<LayerView> view(m, "LayerView",
                             "Layer i of a structure's layer list, read anew at every access: changing it changes the "
                             "structure (its shapes: assign a new list). Converts to a Layer (a copy).");
  py::class_<Layer> layer(m, "Layer",
                          "A layer: thickness (nm), slices, background and shapes (a list of copies: assign a new list "
                          "to change it).");
  layer
      .def(py::init([](double thickness, int slices, Material background, std::vector<Shape> shapes) {
             Layer l;
             l.thickness = thickness;
             l.slices = slices;
             l.background = std::move(background);
             l.shapes = std::move(shapes);
             return l;
           }),
           py::arg("thickness") = 0.0, py::arg("slices") = 0, py::arg("background") = Material{},
           py::arg("shapes") = std::vector<Shape>{})
      .def(py::init([](const LayerView& v) { return v.get(); }), py::arg("view"))
      .def_readwrite("thickness", &Layer::thickness)
      .def_readwrite("slices", &Layer::slices)
      .def_readwrite("max_slice_thickness", &Layer::max_slice_thickness)
      .def_readwrite("background", &Layer::background);
  copied_list(layer, "shapes", &Layer::shapes);
  copied_list(layer, "steps", &Layer::steps);
  py::implicitly_convertible<LayerView, Layer>();
  // The view's attributes, each through the list's current element.
  const auto field = [&view](const char* name, auto member) {
    using M = std::remove_reference_t<decltype(std::declval<Layer&>().*member)>;
    view.def_property(
        name, [member](const LayerView& v) { return M(v.get().*member); },
        [member](const LayerView& v, M value) { v.get().*member = std::move(value); });
  };
  field("thickness", &Layer::thickness);
  field("slices", &Layer::slices);
  field("max_slice_thickness", &Layer::max_slice_thickness);
  field("background", &Layer::background);
  field("steps", &Layer::steps);
  field("shapes", &Layer::shapes);
  // The structure's layers in place (structure.layers[0].thickness = ... changes the structure); a list
  // of Layers converts. Items are LayerViews (by index), never references into the vector's storage.
  py::class_<std::vector<Layer>> layers = py::bind_vector<std::vector<Layer>>(m, "LayerList");
  const auto view_of = [](py::object list, std::ptrdiff_t i) {
    auto& v = list.cast<std::vector<Layer>&>();
    const std::ptrdiff_t n = std::ptrdiff_t(v.size());
    if (i < 0) i += n;
    if (i < 0 || i >= n) throw py::index_error("layer index out of range");
    return LayerView{list, &v, std::size_t(i)};
  };
  layers.attr("__getitem__") = py::cpp_function(
      [view_of](py::object list, py::object key) -> py::object {
        if (py::isinstance<py::slice>(key)) {  // a slice: a new list of copies
          auto& v = list.cast<std::vector<Layer>&>();
          std::size_t start = 0, stop = 0, step = 0, length = 0;
          if (!key.cast<py::slice>().compute(v.size(), &start, &stop, &step, &length)) throw py::error_already_set();
          std::vector<Layer> part;
          for (std::size_t k = 0; k < length; ++k, start += step) part.push_back(v[start]);
          return py::cast(std::move(part));
        }
        return py::cast(view_of(list, key.cast<std::ptrdiff_t>()));
      },
      py::name("__getitem__"), py::is_method(layers));
  layers.attr("__iter__") = py::cpp_function(
      [view_of](py::object list) {
        py::list views;
        for (std::size_t i = 0; i < list.cast<std::vector<Layer>&>().size(); ++i) views.append(view_of(list, std::ptrdiff_t(i)));
        return views.attr("__iter__")();
      },
      py::name("__iter__"), py::is_method(layers));
  py::implicitly_convertible<py::list, std::vector<Layer>>();
  py::class_<Structure>(m, "Structure", "The grating (physics/structure.hpp): lattice, superstrate, substrate, layers top to bottom.")
      .def(py::init([](Lattice lattice, Material superstrate, Material substrate, std::vector<Layer> layers) {
             return Structure{lattice, std::move(superstrate), std::move(substrate), std::move(layers)};
           }),
           py::arg("lattice") = Lattice{}, py::arg("superstrate") = Material{}, py::arg("substrate") = Material{},
           py::arg("layers") = std::vector<Layer>{})
      .def_readwrite("lattice", &Structure::lattice)
      .def_readwrite("superstrate", &Structure::superstrate)
      .def_readwrite("substrate", &Structure::substrate)
      .def_readwrite("layers", &Structure::layers);
}

// --- Cases, solutions ------------------------------------------------------------------------------

void bind_cases(py::module_& m) {
  py::class_<io::IncidenceSweep>(m, "IncidenceSweep")
      .def_readwrite("theta_deg", &io::IncidenceSweep::theta_deg)
      .def_readwrite("phi_deg", &io::IncidenceSweep::phi_deg)
      .def_property_readonly("polarization",
                             [](const io::IncidenceSweep& i) { return std::string(io::to_string(i.polarization)); });
  py::class_<io::Numerics>(m, "Numerics")
      .def_readwrite("harmonics_x", &io::Numerics::harmonics_x)
      .def_readwrite("harmonics_y", &io::Numerics::harmonics_y)
      .def_readwrite("richardson", &io::Numerics::richardson)
      .def_property_readonly("precision", [](const io::Numerics& n) { return std::string(to_string(n.precision)); })
      .def_property_readonly("backend", [](const io::Numerics& n) {
        return n.backend ? std::string(conv::to_string(*n.backend)) : std::string("auto");
      });
  py::class_<io::Case>(m, "Case",
                       "A case as read from YAML (io/case.hpp; lengths in nm, angles in degrees). wavelength_nm, "
                       "incidence, structure and numerics may be changed before solve() (the structure not where the "
                       "case has parameters: each parameter point's is built from the YAML, so solve() refuses an "
                       "edited one); the result file's input/case keeps the YAML as read.")
      .def_readonly("path", &io::Case::path)
      .def_readonly("yaml", &io::Case::yaml)
      .def_readonly("description", &io::Case::description)
      .def_readwrite("wavelength_nm", &io::Case::wavelength_nm)
      .def_readwrite("incidence", &io::Case::incidence)
      .def_readwrite("structure", &io::Case::structure)
      .def_readwrite("numerics", &io::Case::numerics)
      .def_readonly("warnings", &io::Case::warnings)
      .def_property_readonly("materials",
                             [](const io::Case& c) {
                               py::dict d;
                               for (const auto& [name, material] : c.materials) d[py::str(name)] = material;
                               return d;
                             })
      .def_property_readonly("points", &io::Case::points);

  m.def("load", [](const py::object& path) { return io::load_case(path_text(path)); }, py::arg("path"),
        "Reads a YAML case file (io/SCHEMA.md); raises CaseError at the offending line and column.");
  m.def("parse_case", &io::parse_case, py::arg("yaml"), py::arg("name") = "<string>", py::arg("base_directory") = ".",
        "Reads a case from YAML text; `name` is used in messages, tables are found relative to base_directory.");

  py::class_<Solution>(m, "Results",
                       "Every point of a solved case. results[PATH] is the dataset PATH of io/SCHEMA.md §2.2 as a "
                       "NumPy array, shaped [Nw, Nθ, Nφ, ...] (complex values as complex128, where the file adds a "
                       "trailing (re, im) dimension); keys() lists them.")
      .def_readonly("backend", &Solution::backend)
      .def_property_readonly("precision",
                             [](const Solution& s) { return std::string(to_string(s.problem.solver.precision)); })
      .def_readonly("device", &Solution::device)
      .def_readonly("warnings", &Solution::warnings)
      .def_readonly("seconds", &Solution::seconds)
      .def("arrays", [](Solution& s) { return result_arrays(s).attr("copy")(); },
           "Every dataset as a new dict PATH → NumPy array (the arrays read-only, shared with the Results).")
      .def("__getitem__",
           [](Solution& s, const std::string& path) -> py::object {
             py::dict arrays = result_arrays(s);
             if (!arrays.contains(path)) throw py::key_error(path);
             return arrays[py::str(path)];
           })
      .def("keys", [](Solution& s) { return py::list(result_arrays(s)); })
      .def("write", [](const Solution& s, const py::object& path, bool overwrite) { write_solution(s, path_text(path), overwrite); },
           py::arg("path"), py::arg("overwrite") = false,
           "Writes the result file `gratingsim run` writes (io/SCHEMA.md; OUT.h5.partial, then OUT.h5).");

  m.def(
      "solve",
      [](io::Case c, std::optional<std::string> backend, std::optional<std::string> precision) {
        py::gil_scoped_release unlocked;  // other Python threads run while the solver does
        return solve_case(std::move(c), std::move(backend), std::move(precision));
      },
      py::arg("case"), py::arg("backend") = py::none(), py::arg("precision") = py::none(),
      "Solves every sweep point of the case (as `gratingsim run` does) on `backend` (a name or 'auto'; default: the "
      "case's numerics.backend) in `precision` ('single' or 'double'; default: the case's), without holding the GIL.");
}

}  // namespace

PYBIND11_MODULE(_core, m) {
  m.doc() = "gratingsim: electromagnetic diffraction by periodic gratings (the compiled part)";
  register_exceptions(m);
  bind_structures(m);
  bind_cases(m);
  m.def("info", &info, "Version, CUDA devices, the backends the solver can run here and library versions.");
}
