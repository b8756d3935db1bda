#include "reference/npy.hpp"

#include <cctype>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <ios>
#include <limits>
#include <sstream>

#include "reference/error.hpp"

namespace ringlab {
namespace {

constexpr char kMagic[] = "\x93NUMPY";
constexpr size_t kMagicLength = 6;

[[noreturn]] void fail(const std::string& name, const std::string& problem, const std::string& fix) {
  throw UsageError(name + ": " + problem + "; " + fix);
}

// Value text of `key` in the header dict, e.g. "'<f4'" or "(1, 16, 4, 8)" or "False".
std::string dict_value(const std::string& header, const std::string& key, const std::string& name) {
  const std::string quoted[2] = {"'" + key + "'", "\"" + key + "\""};
  size_t at = std::string::npos;
  for (const std::string& q : quoted)
    if ((at = header.find(q)) != std::string::npos) {
      at += q.size();
      break;
    }
  if (at == std::string::npos)
    fail(name, "the .npy header has no '" + key + "' entry", "write the file with numpy.save");
  at = header.find(':', at);
  if (at == std::string::npos)
    fail(name, "the .npy header is malformed near '" + key + "'", "write the file with numpy.save");
  ++at;
  while (at < header.size() && std::isspace(static_cast<unsigned char>(header[at]))) ++at;
  size_t end = at;
  if (at < header.size() && header[at] == '(') {
    end = header.find(')', at);
    if (end == std::string::npos) fail(name, "the .npy header's shape is not closed", "write the file with numpy.save");
    ++end;
  } else {
    while (end < header.size() && header[end] != ',' && header[end] != '}') ++end;
  }
  std::string value = header.substr(at, end - at);
  while (!value.empty() && std::isspace(static_cast<unsigned char>(value.back()))) value.pop_back();
  return value;
}

Shape parse_shape(const std::string& text, const std::string& name) {
  if (text.size() < 2 || text.front() != '(' || text.back() != ')') {
    fail(name, "the .npy shape '" + text + "' is not a tuple", "write the file with numpy.save");
  }
  Shape shape;
  std::string inner = text.substr(1, text.size() - 2);
  std::stringstream stream(inner);
  std::string item;
  while (std::getline(stream, item, ',')) {
    size_t b = 0, e = item.size();
    while (b < e && std::isspace(static_cast<unsigned char>(item[b]))) ++b;
    while (e > b && std::isspace(static_cast<unsigned char>(item[e - 1]))) --e;
    if (b == e) continue;  // trailing comma of a 1-tuple
    int64_t extent = 0;
    for (size_t i = b; i < e; ++i) {
      if (!std::isdigit(static_cast<unsigned char>(item[i])) || extent > (int64_t(1) << 40)) {
        fail(name, "the .npy shape '" + text + "' has a bad extent", "write the file with numpy.save");
      }
      extent = extent * 10 + (item[i] - '0');
    }
    shape.push_back(extent);
  }
  return shape;
}

template <class T>
std::string bytes_of(const Tensor<T>& tensor, const char* descr) {
  std::string header = std::string("{'descr': '") + descr + "', 'fortran_order': False, 'shape': (";
  for (size_t i = 0; i < tensor.shape().size(); ++i) {
    header += std::to_string(tensor.shape()[i]);
    if (tensor.shape().size() == 1 || i + 1 < tensor.shape().size()) header += ", ";
  }
  header += "), }";
  // Pad with spaces and a final newline so the data starts on a 64-byte boundary.
  const bool v2 = header.size() + 1 + kMagicLength + 4 > 65535;
  const size_t prefix = kMagicLength + 2 + (v2 ? 4 : 2);
  const size_t total = ((prefix + header.size() + 1 + 63) / 64) * 64;
  header.append(total - prefix - header.size() - 1, ' ');
  header += '\n';
  std::string out(kMagic, kMagicLength);
  out += static_cast<char>(v2 ? 2 : 1);
  out += static_cast<char>(0);
  const uint32_t length = static_cast<uint32_t>(header.size());
  for (size_t i = 0; i < (v2 ? 4u : 2u); ++i) out += static_cast<char>((length >> (8 * i)) & 0xFF);
  out += header;
  const size_t data_bytes = tensor.storage().size() * sizeof(T);
  const size_t start = out.size();
  out.resize(start + data_bytes);
  if (data_bytes) std::memcpy(out.data() + start, tensor.data(), data_bytes);  // little-endian host
  return out;
}

template <class T>
void write_file(const std::string& path, const Tensor<T>& tensor, const char* descr) {
  const std::string bytes = bytes_of(tensor, descr);
  std::ofstream file(path, std::ios::binary | std::ios::trunc);
  if (!file) throw UsageError(path + ": cannot open for writing; check the directory exists and is writable");
  file.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (!file) throw UsageError(path + ": write failed (disk full?); free space and run again");
}

}  // namespace

NpyArray parse_npy(const std::string& bytes, const std::string& name) {
  if (bytes.size() < kMagicLength + 4 || bytes.compare(0, kMagicLength, kMagic, kMagicLength) != 0) {
    fail(name, "not a .npy file (no \\x93NUMPY magic)", "write it with numpy.save");
  }
  const int major = static_cast<unsigned char>(bytes[6]);
  if (major != 1 && major != 2) {
    fail(name, ".npy format version " + std::to_string(major) + " is not supported (1 and 2 are)",
         "write it with numpy.save, which uses version 1 for ordinary headers");
  }
  const size_t length_bytes = major == 1 ? 2 : 4;
  if (bytes.size() < kMagicLength + 2 + length_bytes) fail(name, "truncated .npy header", "write the file again");
  size_t header_length = 0;
  for (size_t i = 0; i < length_bytes; ++i)
    header_length |= size_t(static_cast<unsigned char>(bytes[kMagicLength + 2 + i])) << (8 * i);
  const size_t data_start = kMagicLength + 2 + length_bytes + header_length;
  if (bytes.size() < data_start) fail(name, "truncated .npy header", "write the file again");
  const std::string header = bytes.substr(kMagicLength + 2 + length_bytes, header_length);

  const std::string descr_text = dict_value(header, "descr", name);
  const std::string fortran = dict_value(header, "fortran_order", name);
  const Shape shape = parse_shape(dict_value(header, "shape", name), name);

  std::string descr = descr_text;
  if (descr.size() >= 2 && (descr.front() == '\'' || descr.front() == '"')) descr = descr.substr(1, descr.size() - 2);
  if (descr == ">f4" || descr == ">f8") {
    fail(name, "data is big-endian (" + descr + ")", "convert with arr.astype('<" + descr.substr(1) + "')");
  }
  if (descr != "<f4" && descr != "<f8") {
    fail(name, "dtype " + descr + " is not supported", "save float32 or float64, e.g. arr.astype(numpy.float32)");
  }
  if (fortran == "True") fail(name, "array is in Fortran order", "save numpy.ascontiguousarray(arr) instead");
  if (fortran != "False") fail(name, "fortran_order is '" + fortran + "'", "write the file with numpy.save");

  const size_t item = descr == "<f4" ? 4 : 8;
  int64_t elements = 1;
  for (int64_t extent : shape) {
    if (extent != 0 && elements > std::numeric_limits<int64_t>::max() / 8 / extent) {
      fail(name, "shape " + shape_string(shape) + " is too large", "check the file");
    }
    elements *= extent;
  }
  const size_t expected = static_cast<size_t>(elements) * item;
  const size_t found = bytes.size() - data_start;
  if (found < expected) {
    fail(name,
         "truncated: shape " + shape_string(shape) + " " + descr + " needs " + std::to_string(expected) +
             " bytes of data, the file has " + std::to_string(found),
         "write the file again");
  }
  if (found > expected) {
    fail(name, std::to_string(found - expected) + " bytes after the data of shape " + shape_string(shape),
         "write the file again with numpy.save");
  }
  NpyArray array{descr, Tensor<double>(shape)};
  const char* data = bytes.data() + data_start;
  for (int64_t i = 0; i < elements; ++i) {
    if (item == 4) {
      float value;
      std::memcpy(&value, data + i * 4, 4);
      array.values[i] = value;
    } else {
      std::memcpy(&array.values[i], data + i * 8, 8);
    }
  }
  return array;
}

NpyArray read_npy(const std::string& path) {
  std::error_code error;
  if (std::filesystem::is_directory(path, error)) {
    throw UsageError(path + " is a directory, not a .npy file; put the array file there (np.save) instead");
  }
  std::ifstream file(path, std::ios::binary);
  if (!file) throw UsageError(path + ": cannot be opened; check the path (and that --in names the right directory)");
  std::string bytes;
  try {
    bytes.assign(std::istreambuf_iterator<char>(file), std::istreambuf_iterator<char>());
  } catch (const std::ios_base::failure&) {  // libstdc++ throws from underflow on a read error
    throw UsageError(path + ": read error; check the file");
  }
  if (file.bad()) throw UsageError(path + ": read error; check the file");
  return parse_npy(bytes, path);
}

std::string npy_bytes(const Tensor<float>& tensor) { return bytes_of(tensor, "<f4"); }
std::string npy_bytes(const Tensor<double>& tensor) { return bytes_of(tensor, "<f8"); }
void write_npy(const std::string& path, const Tensor<float>& tensor) { write_file(path, tensor, "<f4"); }
void write_npy(const std::string& path, const Tensor<double>& tensor) { write_file(path, tensor, "<f8"); }

}  // namespace ringlab
