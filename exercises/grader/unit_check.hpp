// What a submission may compile: the check the grader runs on a submission's preprocessed unit
// (the compiler's -E output, line markers kept) before compiling it, and compiles instead of the
// file itself, so what was checked is what runs.
//
// Every file the preprocessor entered is named by a line marker, however it was reached: a quoted
// or angled include, an absolute path, "..", a name built by a macro, include_next, a symbolic
// link (the check resolves it). Each must be the submission, one of the hand-out's headers, a
// header of the compiler's own include folders, or a header of the student's own in the
// submission's folder (or below it) that is not one of the course's answer files. And the
// submission's own lines must not hold inline assembly: `.incbin` in an asm statement reads any
// file into the object at assembly time, which no line marker shows; the labs need no assembly.
// Line markers can be forged: a `#line 1 "/usr/include/c++/12/vector"` in the submission makes
// what follows look like the compiler's own header. So the files are also taken from the
// compiler's own list of what it opened (-H), and a student's file may hold no line directive.
// And a lab may name the library functions that would do its work for the student (lab.hpp's
// `// grader-refuses:` line: `name` for any use, `.name` for a member, such as SoftmaxState's
// merge beside the student's own free `merge`): the submission's own lines must not name them,
// however the name was declared or spelled before the preprocessor expanded it.
// What this cannot see, and why it does not matter: `__has_include` is evaluated away (it tells
// whether a file exists, never what it holds, and an autograder holds no answer file to find).
#pragma once

#include <string>
#include <vector>

namespace ringlab::grader {

struct UnitRules {
  std::string submission;              // the submitted file (any spelling: it is resolved)
  std::vector<std::string> handout;    // folders of the hand-out's headers
  std::vector<std::string> system;     // the compiler's own include folders
  std::vector<std::string> forbidden;  // never, even inside the submission's folder
  std::vector<std::string> opened;     // every file the compiler opened (-H), however marked
  std::vector<std::string> refused;    // names the submission may not use (`name`, `.name`)
};

// The names of a lab.hpp's `// grader-refuses: a b .c` lines, in order.
std::vector<std::string> refused_names(const std::string& lab_header);

// The files the compiler's -H output names (lines ". path", ".. path", ...), and that output
// without them (what a compile error shows).
std::vector<std::string> opened_files(const std::string& output, std::string* rest = nullptr);

// Whether a file's text holds a line directive (`#line N`, or GNU's `# N "file"`), digraphs and
// spaces included: the way to forge a line marker.
bool has_line_directive(const std::string& text);

// The files a preprocessed unit entered, in order, each once, as the line markers spell them
// (without "<built-in>" and "<command-line>").
std::vector<std::string> unit_files(const std::string& unit);

// "" when the unit may be compiled; otherwise one line saying what was refused and why.
std::string check_unit(const std::string& unit, const UnitRules& rules);

// The compiler's own include folders (`COMPILER -xc++ -E -v /dev/null`), resolved.
std::vector<std::string> compiler_include_dirs(const std::string& compiler, const std::vector<std::string>& flags);

}  // namespace ringlab::grader
