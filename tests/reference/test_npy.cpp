// .npy: round trips, and each malformed case is a UsageError naming the problem.
#include <catch2/catch.hpp>
#include <cstring>

#include "reference/error.hpp"
#include "reference/npy.hpp"

using namespace ringlab;

namespace {

std::string header_file(const std::string& dict, const std::string& data, int major = 1) {
  std::string header = dict;
  while ((10 + header.size() + 1) % 64 != 0) header += ' ';
  header += '\n';
  std::string bytes("\x93NUMPY", 6);
  bytes += static_cast<char>(major);
  bytes += '\0';
  bytes += static_cast<char>(header.size() & 0xFF);
  bytes += static_cast<char>(header.size() >> 8);
  return bytes + header + data;
}

std::string floats(std::initializer_list<float> values) {
  std::string data(values.size() * 4, '\0');
  std::memcpy(data.data(), std::data(values), data.size());
  return data;
}

}  // namespace

TEST_CASE(".npy round trip for float32 and float64", "[npy]") {
  Tensor<float> f({2, 3, 1, 5});
  for (int64_t i = 0; i < f.size(); ++i) f[i] = 0.25f * static_cast<float>(i) - 3.0f;
  const NpyArray a = parse_npy(npy_bytes(f), "f.npy");
  CHECK(a.descr == "<f4");
  CHECK(a.values.shape() == f.shape());
  CHECK(a.values.cast<float>() == f);
  CHECK(npy_bytes(f).find("\x93NUMPY") == 0);
  CHECK((npy_bytes(f).size() - f.size() * 4) % 64 == 0);  // data aligned on 64 bytes

  Tensor<double> d({7});
  for (int64_t i = 0; i < 7; ++i) d[i] = 1.0 / (1.0 + double(i));
  const NpyArray b = parse_npy(npy_bytes(d), "d.npy");
  CHECK(b.descr == "<f8");
  CHECK(b.values == d);
  CHECK(npy_bytes(d).find("'shape': (7, )") != std::string::npos);
}

TEST_CASE("a hand-written NumPy header with another key order parses", "[npy]") {
  const std::string bytes =
      header_file("{'shape': (2, 2), 'fortran_order': False, 'descr': '<f4', }", floats({1, 2, 3, 4}));
  const NpyArray a = parse_npy(bytes, "x.npy");
  CHECK(a.values.shape() == Shape{2, 2});
  CHECK(a.values[3] == 4.0);
}

TEST_CASE("malformed .npy files are clear errors", "[npy]") {
  struct Bad {
    const char* what;
    std::string bytes;
    const char* message;
  };
  const std::string good_dict = "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 2), }";
  const Bad cases[] = {
      {"bad magic", "PK\x03\x04 this is a zip file", "not a .npy file"},
      {"empty", "", "not a .npy file"},
      {"version 3", header_file(good_dict, floats({1, 2, 3, 4}), 3), "version 3"},
      {"truncated header", header_file(good_dict, "").substr(0, 30), "truncated .npy header"},
      {"truncated data", header_file(good_dict, floats({1, 2, 3})), "truncated"},
      {"trailing bytes", header_file(good_dict, floats({1, 2, 3, 4, 5})), "bytes after the data"},
      {"int64", header_file("{'descr': '<i8', 'fortran_order': False, 'shape': (2,), }", std::string(16, '\0')),
       "dtype <i8"},
      {"float16", header_file("{'descr': '<f2', 'fortran_order': False, 'shape': (2,), }", std::string(4, '\0')),
       "dtype <f2"},
      {"big-endian", header_file("{'descr': '>f4', 'fortran_order': False, 'shape': (2, 2), }", floats({1, 2, 3, 4})),
       "big-endian"},
      {"fortran", header_file("{'descr': '<f4', 'fortran_order': True, 'shape': (2, 2), }", floats({1, 2, 3, 4})),
       "Fortran order"},
      {"no shape", header_file("{'descr': '<f4', 'fortran_order': False, }", floats({1})), "no 'shape'"},
      {"bad shape", header_file("{'descr': '<f4', 'fortran_order': False, 'shape': (2, x), }", floats({1, 2})),
       "bad extent"},
  };
  for (const Bad& bad : cases) {
    INFO(bad.what);
    CHECK_THROWS_AS(parse_npy(bad.bytes, "bad.npy"), UsageError);
    CHECK_THROWS_WITH(parse_npy(bad.bytes, "bad.npy"), Catch::Contains("bad.npy") && Catch::Contains(bad.message));
  }
  CHECK_THROWS_WITH(read_npy("/nonexistent/q.npy"), Catch::Contains("cannot be opened"));
}
