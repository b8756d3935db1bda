// What every lab's student file may use besides its lab.hpp: the TODO marker of the starters.
//
// A starter's unfinished function calls lab::todo("what is missing"); the grader reports the
// criterion as failed with "not implemented: what is missing" instead of a crash.
#pragma once

#include <stdexcept>
#include <string>

namespace ringlab::lab {

class NotImplemented : public std::logic_error {
 public:
  explicit NotImplemented(const std::string& what) : std::logic_error(what) {}
};

[[noreturn]] inline void todo(const std::string& what) { throw NotImplemented(what); }

}  // namespace ringlab::lab
