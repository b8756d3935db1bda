#!/usr/bin/env python3
"""Static checks of the CUDA kernels, from the objects the build already made (no GPU, no recompile).

    kernel_static.py resources LIB...    per-kernel table: registers, stack frame (spills), static and
                                         dynamic shared memory; exit 1 when a kernel breaks a limit
    kernel_static.py costs LIB...        per-kernel static instruction counts of the main loop (PTX),
                                         next to FlashAttention-2's ratios derived from its tile shapes
    kernel_static.py fused-init LIB...   forward_fa2_init_kernel loads no fp32 state (ld.global.f32),
                                         where forward_fa2_kernel does; exit 1 otherwise, 77 without zstd
    kernel_static.py sass LIB...         per tensor-core kernel, its SASS (decoded from the cubin): instructions
                                         in all and in the main loop, HMMA and LDSM there (checked against the
                                         tile shapes), instructions per HMMA, local memory inside and outside
                                         the loop, the loop's commonest opcodes
    kernel_static.py self-test           the checks run on synthetic input (a spill, too many
                                         registers, too much shared memory) must fail

LIB: static libraries or object files built by nvcc (gpu/libringlab_gpu_kernels.a). The sm_90 cubins
are read straight out of their fat binaries: register count from the .text section header, stack
frame from .nv.info, static shared memory from the .nv.shared section. The dynamic shared memory a
launcher requests comes from the "ringlab-smem:" records the launchers (forward.cu, backward.cu)
compile into their objects. `resources --ptxas-log FILE` checks `nvcc -Xptxas=-v` output instead
(that one names spill stores and loads separately; the cubin only has the stack frame they live in).

cuobjdump and nvdisasm are not needed (the toolkit installed here and in CI has neither); the PTX for `costs` is zstd
compressed in the fat binary, so `costs` and `fused-init` need the zstd command.

SASS without a disassembler: every sm_90 instruction is 128 bits, its opcode in bits 0..11 (the encoding
Mesa's NAK compiler writes for SM70 and later; an ALU opcode is a 9-bit family in bits 0..8 and its operand
form in bits 9..11), its guard predicate in bits 12..15 (7: always). Only what the checks need is named
(HMMA, LDSM, the local, shared and global loads and stores, BRA, EXIT, ...); the rest is counted by family.
A BRA's target, read off the cubins ptxas writes (every target an instruction of the kernel, the join
points of if/else the same): the next instruction's offset + 4 x bits 16..23 + 256 x bits 32..81 (signed).
From the branches: basic blocks, dominators, natural loops; the main loop is the smallest loop holding every
HMMA. A stack frame (spills) then passes `resources` only when no local-memory access (LDL, STL) lies in
the main loop and the frame is at most 16 bytes: a value spilled before the loop and reloaded after it costs
two instructions per block, where the strict rule would hold a kernel to a register budget it cannot meet.
"""
import argparse
import collections
import re
import shutil
import struct
import subprocess
import sys

# sm_90: 228 KiB of shared memory per SM, at most 227 KiB per block (static + dynamic, the dynamic part
# above 48 KiB by cudaFuncSetAttribute opt-in); the CUDA runtime reserves the remaining 1 KiB.
SMEM_LIMIT = 227 * 1024
REG_LIMIT = 255
FATBIN_MAGIC = 0xBA55ED50
CUBIN_KIND, PTX_KIND = 2, 1


# ---- reading fat binaries and cubins -----------------------------------------------------------

def fatbin_entries(blob):
    """(kind, sm, payload bytes) of every fat binary found in blob (an object, or an archive of them)."""
    magic = struct.pack("<I", FATBIN_MAGIC)
    pos = blob.find(magic)
    while pos >= 0:
        _, _, header_size, fat_size = struct.unpack_from("<IHHQ", blob, pos)
        entry, end = pos + header_size, pos + header_size + fat_size
        while entry + 16 <= end:
            kind, _, entry_header, payload_size = struct.unpack_from("<HHIQ", blob, entry)
            sm = struct.unpack_from("<I", blob, entry + 28)[0]
            flags = struct.unpack_from("<Q", blob, entry + 40)[0] if entry_header >= 48 else 0
            start = entry + entry_header
            packed = struct.unpack_from("<I", blob, entry + 16)[0]  # compressed size (payload is padded)
            size = packed if 0 < packed <= payload_size else payload_size
            yield kind, sm, flags, blob[start:start + size]
            entry = start + payload_size
        pos = blob.find(magic, max(end, pos + 1))


def elf_sections(elf):
    """{name: (type, flags, info, size, bytes)} of a 64-bit little-endian ELF."""
    shoff = struct.unpack_from("<Q", elf, 0x28)[0]
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", elf, 0x3A)
    headers = [struct.unpack_from("<IIQQQQIIQQ", elf, shoff + i * shentsize) for i in range(shnum)]
    names = headers[shstrndx]

    def name(offset):
        start = names[4] + offset
        return elf[start:elf.index(b"\0", start)].decode()

    sections = {}
    for h in headers:
        sh_name, sh_type, sh_flags, _, sh_offset, sh_size, _, sh_info, _, _ = h
        data = b"" if sh_type == 8 else elf[sh_offset:sh_offset + sh_size]  # SHT_NOBITS: no bytes
        sections[name(sh_name)] = (sh_type, sh_flags, sh_info, sh_size, data)
    return sections


EIATTR_FRAME_SIZE = 0x11  # per-kernel stack frame (spills and local arrays live there)
EIATTR_REGCOUNT = 0x2F  # per-kernel register count
RESERVED_SMEM = 1024  # sm_90's shared memory reserved for the system, counted in .nv.shared.<kernel>


def nv_info_values(data, attribute):
    """Values of `attribute` in an .nv.info section: records of (format, attribute, ...)."""
    values, pos = [], 0
    while pos + 2 <= len(data):
        fmt, attr = data[pos], data[pos + 1]
        if fmt == 0x04:  # EIFMT_SVAL: 2-byte size, then the value
            size = struct.unpack_from("<H", data, pos + 2)[0]
            if attr == attribute:
                values.append(data[pos + 4:pos + 4 + size])
            pos += 4 + size
        elif fmt in (0x01, 0x02, 0x03):  # EIFMT_NVAL / BVAL / HVAL: 2 bytes
            pos += 4
        else:
            break
    return values


def cubin_kernels(elf):
    """{mangled: {registers, stack, static_smem}} of every kernel (.text.<name>) in a cubin."""
    sections = elf_sections(elf)
    info = sections.get(".nv.info", (0, 0, 0, 0, b""))[4]
    symbols = symbol_names(sections)

    def per_kernel(attribute):
        values = {}
        for value in nv_info_values(info, attribute):
            index, size = struct.unpack_from("<II", value)
            values[symbols.get(index, "")] = size
        return values

    frames, registers = per_kernel(EIATTR_FRAME_SIZE), per_kernel(EIATTR_REGCOUNT)
    reserved = RESERVED_SMEM if ".nv.shared.reserved.0" in sections else 0
    kernels = {}
    for name in sections:
        if not name.startswith(".text."):
            continue
        mangled = name[len(".text."):]
        if (".nv.info." + mangled) not in sections:
            continue  # a device function, not a kernel
        shared = sections.get(".nv.shared." + mangled)
        static = shared[3] if shared else 0
        kernels[mangled] = {
            "text": sections[name][4],
            "uses_smem": shared is not None,
            "registers": registers.get(mangled, -1),
            "stack": frames.get(mangled, 0),
            # ptxas -v's "bytes smem": the section less the system's reserved kilobyte, which the CUDA
            # runtime adds outside the 227 KiB a block may use.
            "static_smem": static - min(static, reserved),
        }
    return kernels


def symbol_names(sections):
    symtab = sections.get(".symtab")
    strtab = sections.get(".strtab")
    if not symtab or not strtab:
        return {}
    names, data, strings = {}, symtab[4], strtab[4]
    for index in range(len(data) // 24):
        st_name = struct.unpack_from("<I", data, index * 24)[0]
        names[index] = strings[st_name:strings.index(b"\0", st_name)].decode()
    return names


def smem_records(blob):
    """{demangled kernel: dynamic shared memory bytes} from the launchers' "ringlab-smem:" records."""
    records = {}
    for match in re.finditer(rb"ringlab-smem:([^=\0]+)=(\d+)\0", blob):
        records[match.group(1).decode()] = int(match.group(2))
    return records


def demangle(names):
    tool = shutil.which("cu++filt") or shutil.which("/usr/local/cuda/bin/cu++filt") or shutil.which("c++filt")
    if not tool or not names:
        return {n: n for n in names}
    out = subprocess.run([tool], input="\n".join(names), capture_output=True, text=True, check=True).stdout
    return dict(zip(names, out.splitlines()))


def short(demangled):
    """'void ringlab::gpu::forward_mma_kernel<__nv_bfloat16, 64>(ringlab::gpu::ForwardParams)' ->
    'forward_mma_kernel<__nv_bfloat16, 64>'."""
    name = re.sub(r"^void ", "", demangled)
    depth, cut = 0, len(name)
    for i, c in enumerate(name):  # drop the parameter list: the first '(' outside template brackets
        if c == "<":
            depth += 1
        elif c == ">":
            depth -= 1
        elif c == "(" and depth == 0:
            cut = i
            break
    return name[:cut].replace("ringlab::gpu::", "")


def read_libraries(paths, sm):
    kernels, dynamic, ptx = {}, {}, []
    for path in paths:
        with open(path, "rb") as f:
            blob = f.read()
        dynamic.update(smem_records(blob))
        for kind, entry_sm, flags, payload in fatbin_entries(blob):
            if entry_sm != sm:
                continue
            if kind == CUBIN_KIND and payload[:4] == b"\x7fELF":
                kernels.update(cubin_kernels(payload))
            elif kind == PTX_KIND:
                ptx.append(payload)
    return kernels, dynamic, ptx


# ---- SASS ------------------------------------------------------------------------------------------

# 12-bit opcodes of the instructions the checks name (SM70+ encoding; STL, STS, LDG, STG, RED have two
# forms on SM73+), and the 9-bit families of the ALU instructions, whose form bits 9..11 vary.
SASS_OPCODES = {
    0x23C: "HMMA", 0x237: "IMMA", 0x83B: "LDSM", 0x844: "STSM", 0x984: "LDS", 0x388: "STS", 0x988: "STS", 0x983: "LDL",
    0x387: "STL", 0x987: "STL", 0x381: "LDG", 0x981: "LDG", 0x386: "STG", 0x986: "STG", 0x98E: "RED",
    0x9A6: "RED", 0x9A3: "ATOMG", 0x9A8: "ATOMG", 0xB82: "LDC", 0xAB9: "ULDC", 0x389: "SHFL", 0x589: "SHFL",
    0x989: "SHFL", 0xF89: "SHFL", 0x919: "S2R", 0x9C3: "S2UR", 0x805: "CS2R", 0x3C2: "R2UR", 0x806: "VOTE",
    0x81C: "PLOP3", 0x947: "BRA", 0x945: "BSSY", 0x941: "BSYNC", 0x94D: "EXIT", 0x918: "NOP", 0xB1D: "BAR",
}
SASS_FAMILIES = {
    0x002: "MOV", 0x007: "SEL", 0x008: "FSEL", 0x009: "FMNMX", 0x00B: "FSETP", 0x00C: "ISETP", 0x010: "IADD3",
    0x011: "LEA", 0x012: "LOP3", 0x016: "PRMT", 0x017: "IMNMX", 0x019: "SHF", 0x020: "FMUL", 0x021: "FADD", 0x023: "FFMA",
    0x024: "IMAD", 0x025: "IMAD.WIDE", 0x03E: "F2FP", 0x108: "MUFU", 0x087: "USEL", 0x08C: "UISETP",
    0x090: "UIADD3", 0x092: "ULOP3", 0x099: "USHF", 0x0A4: "UIMAD",
}
LOCAL_MEMORY = ("LDL", "STL")
GUARD_ALWAYS = 0x7  # bits 12..15: predicate 7 (PT), not negated


def sass_instructions(text):
    """[(offset, name, conditional, target)] of a kernel's .text: name from the opcode ('op:0x...' when
    not named), conditional when guarded by a predicate (or, for a BRA, by a register: bits 24..31),
    target the byte offset a BRA jumps to (else None)."""
    out = []
    for offset in range(0, len(text) - 15, 16):
        w0, w1 = struct.unpack_from("<QQ", text, offset)
        op = w0 & 0xFFF
        name = SASS_OPCODES.get(op) or SASS_FAMILIES.get(w0 & 0x1FF) or f"op:{op:#05x}"
        conditional = (w0 >> 12) & 0xF != GUARD_ALWAYS
        target = None
        if name == "BRA":
            high = (w0 >> 32) | ((w1 & ((1 << 18) - 1)) << 32)  # bits 32..81
            if high >> 49:
                high -= 1 << 50
            target = offset + 16 + 4 * ((w0 >> 16) & 0xFF) + 256 * high
            conditional = conditional or (w0 >> 24) & 0xFF != 0
        out.append((offset, name, conditional, target))
    return out


def sass_blocks(instructions):
    """(starts, successors): the basic blocks' first offsets, and per block the indices of the blocks
    control can pass to. None when a branch leaves the kernel (the decoding does not hold)."""
    size = 16 * len(instructions)
    leaders = {0}
    for offset, name, _, target in instructions:
        if name == "BRA":
            if target is None or not 0 <= target < size or target % 16:
                return None
            leaders.add(target)
        if name in ("BRA", "EXIT") and offset + 16 < size:
            leaders.add(offset + 16)
    starts = sorted(leaders)
    index = {start: i for i, start in enumerate(starts)}
    successors = []
    for i, start in enumerate(starts):
        end = starts[i + 1] if i + 1 < len(starts) else size
        _, name, conditional, target = instructions[end // 16 - 1]
        nxt = [i + 1] if i + 1 < len(starts) else []
        if name == "BRA":
            successors.append([index[target]] + (nxt if conditional else []))
        elif name == "EXIT":
            successors.append(nxt if conditional else [])
        else:
            successors.append(nxt)
    return starts, successors


def natural_loops(successors):
    """{header block: set of blocks} of every natural loop (back edges u -> h, h dominating u; loops
    sharing a header merged), over the blocks reachable from block 0."""
    n = len(successors)
    predecessors = [[] for _ in range(n)]
    reachable, stack = {0}, [0]
    while stack:
        b = stack.pop()
        for c in successors[b]:
            predecessors[c].append(b)
            if c not in reachable:
                reachable.add(c)
                stack.append(c)
    dominators = {b: set(reachable) for b in reachable}
    dominators[0] = {0}
    changed = True
    while changed:
        changed = False
        for b in sorted(reachable - {0}):
            new = set.intersection(*(dominators[p] for p in predecessors[b] if p in reachable)) | {b}
            if new != dominators[b]:
                dominators[b], changed = new, True
    loops = {}
    for u in reachable:
        for h in successors[u]:
            if h in dominators[u]:  # a back edge; the walk stops at the header (a self-loop: nothing to walk)
                body, stack = {h, u}, [u] if u != h else []
                while stack:
                    b = stack.pop()
                    for p in predecessors[b]:
                        if p in reachable and p not in body:
                            body.add(p)
                            stack.append(p)
                loops.setdefault(h, set()).update(body)
    return loops


def sass_summary(text):
    """The kernel's SASS by the numbers: total instructions; and, when it has HMMA, its main loop (the
    smallest natural loop holding every HMMA): its instruction count and opcode counts, and the local
    memory accesses inside and outside it. main_loop False: no such loop (or the branches did not decode)."""
    instructions = sass_instructions(text)
    summary = dict(total=len(instructions), hmma=sum(1 for i in instructions if i[1] == "HMMA"), main_loop=False,
                   local_in_loop=0, local_outside=sum(1 for i in instructions if i[1] in LOCAL_MEMORY), loop={})
    blocks = sass_blocks(instructions) if summary["hmma"] else None
    if blocks is None:
        return summary
    starts, successors = blocks
    block_of = [0] * len(instructions)
    for i, start in enumerate(starts):
        end = starts[i + 1] if i + 1 < len(starts) else 16 * len(instructions)
        for k in range(start // 16, end // 16):
            block_of[k] = i
    with_hmma = {block_of[k] for k, ins in enumerate(instructions) if ins[1] == "HMMA"}
    candidates = [body for body in natural_loops(successors).values() if with_hmma <= body]
    if not candidates:
        return summary
    body = min(candidates, key=len)
    inside = [ins[1] for k, ins in enumerate(instructions) if block_of[k] in body]
    summary.update(main_loop=True, loop=collections.Counter(inside),
                   local_in_loop=sum(1 for name in inside if name in LOCAL_MEMORY))
    summary["local_outside"] -= summary["local_in_loop"]
    summary["loop_total"] = len(inside)
    return summary


def frame_allowed(row):
    """A stack frame that costs nothing in the loop: at most 16 bytes, and no local-memory access in the
    kernel's main loop (sass_summary). Kernels without a decoded main loop get no such leeway."""
    sass = row.get("sass")
    return bool(sass and sass["main_loop"] and sass["local_in_loop"] == 0 and row["stack"] <= 16)


# ---- resources ------------------------------------------------------------------------------------

def check(rows):
    """rows: dicts with name, registers, spill (bytes or None), stack, static_smem, dynamic_smem.
    Returns the list of problems."""
    problems = []
    for r in rows:
        if r.get("uses_smem") and r["dynamic_smem"] is None:
            problems.append(f"{r['name']}: uses shared memory but no launcher records its dynamic size "
                            "(smem_record in launch.cuh)")
        if r["registers"] > REG_LIMIT:
            problems.append(f"{r['name']}: {r['registers']} registers > {REG_LIMIT}")
        if not (r["stack"] > 0 and frame_allowed(r)):  # allowed: spilled before the main loop, reloaded after it
            if r.get("sass") and r["sass"]["local_in_loop"]:
                problems.append(f"{r['name']}: {r['sass']['local_in_loop']} local-memory accesses in the main loop "
                                "(spills the loop pays for)")
            if r["spill"]:
                problems.append(f"{r['name']}: {r['spill']} bytes of register spills")
            if r["stack"] > 0:
                problems.append(f"{r['name']}: {r['stack']}-byte stack frame (spills or a local array; expected 0, or "
                                "at most 16 bytes none of which the main loop touches)")
        total = r["static_smem"] + (r["dynamic_smem"] or 0)
        if total > SMEM_LIMIT:
            problems.append(f"{r['name']}: {r['static_smem']} static + {r['dynamic_smem'] or 0} dynamic bytes of "
                            f"shared memory > {SMEM_LIMIT} (sm_90 per block)")
    return problems


def print_markdown(cells, left=(0,), file=sys.stdout):
    """cells[0] is the header; columns in `left` are left-aligned, the others right-aligned."""
    widths = [max(len(row[i]) for row in cells) for i in range(len(cells[0]))]
    for i, row in enumerate(cells):
        print("| " + " | ".join(v.ljust(w) if j in left else v.rjust(w) for j, (v, w) in enumerate(zip(row, widths)))
              + " |", file=file)
        if i == 0:
            print("|" + "|".join("-" * (w + 2) for w in widths) + "|", file=file)


def print_table(rows, file=sys.stdout):
    header = ("kernel", "registers", "spill bytes", "stack", "static smem", "dynamic smem requested")
    cells = [header] + [(r["name"], str(r["registers"]), "-" if r["spill"] is None else str(r["spill"]),
                         str(r["stack"]), str(r["static_smem"]),
                         "-" if r["dynamic_smem"] is None else str(r["dynamic_smem"])) for r in rows]
    print_markdown(cells, file=file)


def rows_from_libraries(paths, sm):
    kernels, dynamic, _ = read_libraries(paths, sm)
    names = demangle(sorted(kernels))
    rows = []
    for mangled in sorted(kernels, key=lambda m: short(names[m])):
        k = kernels[mangled]
        name = short(names[mangled])
        # spills live in the stack frame: none without one (a frame fails the check on its own)
        rows.append(dict(name=name, registers=k["registers"], spill=0 if k["stack"] == 0 else None, stack=k["stack"],
                         static_smem=k["static_smem"], dynamic_smem=dynamic.get(name), uses_smem=k["uses_smem"],
                         sass=sass_summary(k["text"]) if k["stack"] > 0 else None))
    return rows, sorted(set(dynamic) - {r["name"] for r in rows})


def parse_ptxas_log(text):
    """Rows from `ptxas -v` output (nvcc -Xptxas=-v)."""
    rows, current = [], None
    for line in text.splitlines():
        m = re.search(r"Function properties for (\S+)", line) or re.search(r"Compiling entry function '([^']+)'", line)
        if m:
            if current is None or current["mangled"] != m.group(1):
                current = dict(mangled=m.group(1), registers=0, spill=0, stack=0, static_smem=0, dynamic_smem=None)
                rows.append(current)
            continue
        if current is None:
            continue
        m = re.search(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads", line)
        if m:
            current["stack"] = int(m.group(1))
            current["spill"] = int(m.group(2)) + int(m.group(3))
        m = re.search(r"Used (\d+) registers", line)
        if m:
            current["registers"] = int(m.group(1))
        m = re.search(r"(\d+) bytes smem", line)
        if m:
            current["static_smem"] = int(m.group(1))
    names = demangle([r["mangled"] for r in rows])
    for r in rows:
        r["name"] = short(names[r.pop("mangled")])
    return rows


def resources(args):
    if args.ptxas_log:
        with open(args.ptxas_log) as f:
            rows = parse_ptxas_log(f.read())
        dynamic = {}
        for path in args.libraries:
            with open(path, "rb") as f:
                dynamic.update(smem_records(f.read()))
        for r in rows:
            r["dynamic_smem"] = dynamic.get(r["name"])
        orphans = []
    else:
        rows, orphans = rows_from_libraries(args.libraries, args.sm)
    if args.kernels:  # e.g. the ladder's library: only the rung that keeps production records (05)
        rows = [r for r in rows if re.search(args.kernels, r["name"])]
    if not rows:
        print(f"kernel_static: no sm_{args.sm} kernels found in {' '.join(args.libraries)}", file=sys.stderr)
        return 1
    print(f"Kernel resources, sm_{args.sm} (static, from the built cubins; limits: {REG_LIMIT} registers, "
          f"no stack frame (or <= 16 bytes the main loop never touches), static + dynamic shared memory <= "
          f"{SMEM_LIMIT} bytes)")
    print_table(rows)
    print("(spill bytes: 0 where the stack frame is 0, as spills live in it; dynamic smem '-': the kernel uses no "
          "shared memory and its launcher records none)")
    for r in rows:
        if r["stack"] > 0 and frame_allowed(r):
            print(f"note: {r['name']}: {r['stack']}-byte stack frame, its {r['sass']['local_outside']} local-memory "
                  "accesses all outside the main loop (allowed: kernel_static.py's head comment)")
    problems = check(rows) + [f"a ringlab-smem record names {name}, which no kernel has (renamed?)" for name in orphans]
    for p in problems:
        print("FAIL: " + p)
    if not problems:
        print(f"OK: {len(rows)} kernels within the limits")
    if args.rows:  # scripts/bench's summary line (bench/report_row.hpp)
        bad = len({p.split(":")[0] for p in problems})
        print(f"@row|gpu static (cubin)|sm_{args.sm} kernels with <= {REG_LIMIT} registers, no spills in the main loop, shared memory "
              f"<= 227 KiB|{len(rows) - bad} of {len(rows)}|all|{'MISSED' if problems else 'met'}")
    return 1 if problems else 0


# ---- costs ----------------------------------------------------------------------------------------

COUNTED = [  # (column, PTX opcode prefix)
    ("mma", "mma.sync"), ("ldmatrix", "ldmatrix"), ("ex2", "ex2"), ("atomics", ("red.", "atom.")),
    ("bar.sync", ("bar.sync", "barrier.sync")), ("cp.async", "cp.async."), ("ld.global", "ld.global"),
]
ATOMIC_PREFIXES = ("red.", "atom.")
# The counted columns, plus the floats the atomics add (a vector red adds 2 or 4 in one instruction).
COLUMNS = [c for c, _ in COUNTED] + ["atomic floats"]


def ptx_functions(ptx):
    """{mangled: [instruction lines]} of the .entry functions of a PTX text."""
    functions, current, depth = {}, None, 0
    for line in ptx.splitlines():
        m = re.match(r"\s*\.(?:visible\s+)?\.entry\s+(\S+?)\(", line + "(")
        if m and current is None:
            current, depth = m.group(1), 0
            functions[current] = []
            continue
        if current is None:
            continue
        depth += line.count("{") - line.count("}")
        if "}" in line and depth <= 0 and functions[current]:
            current = None
            continue
        functions[current].append(line.strip())
    return functions


def main_loop(lines):
    """The instruction lines of the loop that holds the most mma.sync (else the most instructions):
    from a label to the last branch back to it. Of nested loops holding the same mma.sync (a tile
    loop inside a loop over chunks of tiles, forward_fa2), the innermost: the one a tile runs."""
    labels = {}
    for i, line in enumerate(lines):
        m = re.match(r"(\$L__\w+):", line)
        if m:
            labels[m.group(1)] = i
    best, best_key = None, (-1, -1)
    for j, line in enumerate(lines):
        m = re.search(r"\bbra(?:\.uni)?\s+(\$L__\w+);", line)
        if not m or m.group(1) not in labels or labels[m.group(1)] >= j:
            continue
        body = lines[labels[m.group(1)]:j + 1]
        mmas = sum(1 for b in body if b.lstrip("@%!p0123456789 ").startswith("mma.sync"))
        key = (mmas, -len(body)) if mmas else (0, len(body))
        if key > best_key:
            best, best_key = body, key
    return best or []


def count(lines):
    """{column: (unconditional, conditional)}: an instruction is conditional when it lies between a
    predicated forward branch and its target inside the loop (an if that some tiles skip, e.g. the
    first tile's load of Q into registers or the mask of a cut tile)."""
    labels = {}
    for i, line in enumerate(lines):
        m = re.match(r"(\$L__\w+):", line)
        if m:
            labels[m.group(1)] = i
    skipped = [False] * len(lines)
    for i, line in enumerate(lines):
        m = re.match(r"@!?%\w+\s+bra(?:\.uni)?\s+(\$L__\w+);", line)
        if m and labels.get(m.group(1), -1) > i:
            for k in range(i + 1, labels[m.group(1)]):
                skipped[k] = True
    counts = {c: [0, 0] for c in COLUMNS}
    for line, conditional in zip(lines, skipped):
        op = re.sub(r"^@!?%?\w+\s+", "", line)  # a guard: @%p1 (nvcc) or @p (inline asm's own predicate)
        for column, prefix in COUNTED:
            if op.startswith(prefix):
                counts[column][1 if conditional else 0] += 1
        if op.startswith(ATOMIC_PREFIXES):  # one instruction, 1, 2 or 4 floats (red.global.add.v4.f32)
            width = re.search(r"\.v([24])\.", op)
            counts["atomic floats"][1 if conditional else 0] += int(width.group(1)) if width else 1
    return counts


def decompress_ptx(payload):
    if payload[:4] == b"\x28\xb5\x2f\xfd":  # zstd frame
        zstd = shutil.which("zstd")
        if not zstd:
            return None
        payload = subprocess.run([zstd, "-dc"], input=payload, capture_output=True, check=True).stdout
    return payload.split(b"\0", 1)[0].decode(errors="replace")


# FlashAttention-2 design (Dao 2023): each warp owns R query rows of the block's tile, so per 16-wide
# k-step it loads K's (or V's) B fragments by one ldmatrix.x4 per 16 key columns and reuses them for
# each of its R/16 m-tiles. Per K/V tile of BK keys and head dimension D, both GEMMs together:
#   mma      = 2 * (R/16) * (BK/8) * (D/16)         S = Q K^T and O += P V, m16n8k16
#   ldmatrix = 2 * (BK/16) * (D/16)                  K and V (transposed), one x4 per 16x16
#            + (R/16) * (D/16)                       Q's A fragments, when re-read from shared
#                                                    memory every tile (FA2's default, Q not in registers)
# D cancels: with Q in registers ldmatrix/mma = 8 / R; with Q re-read, (R/16 + 2 BK/16) / (2 (R/16) (BK/8)).
def fa2_ldmatrix_per_mma(rows_per_warp, block_k=64, q_in_registers=True):
    m_tiles = rows_per_warp / 16
    loads = 2 * block_k / 16 + (0 if q_in_registers else m_tiles)
    return loads / (2 * m_tiles * block_k / 8)


# FlashAttention-2's backward (Dao 2023) with its warp layouts: a block of BK keys and W warps walks
# tiles of BQ queries in three products, each split among the warps its own way (warp tiles m x n,
# one ldmatrix.x4 per 16 x 16 A or B fragment, each reused across the warp tile):
#   S^T = K Q^T, dP^T = V dO^T   BK/G1 keys x BQ/(W/G1) queries, k = D      (G1 key groups)
#   dV += P^T dO, dK += dS^T Q   BK/G2 keys x D/(W/G2) dims,    k = BQ     (P^T, dS^T from shared memory)
#   dQ = dS K                    BQ/G3 queries x D/(W/G3) dims, k = BK     (G3 query groups)
# per product: ldmatrix = (k/16)(m/16 + n/16) and mma = (k/16)(m/16)(n/8), both doubled for the
# first two (two GEMMs on the same shapes).
def fa2_backward_ldmatrix_per_mma(dim, block_q, block_k=128, warps=8, key_groups=(4, 4), dq_groups=2):
    loads, mma = fa2_backward_counts(dim, block_q, block_k, warps, key_groups, dq_groups)
    return loads / mma


def fa2_backward_counts(dim, block_q, block_k=128, warps=8, key_groups=(4, 4), dq_groups=2):
    """(ldmatrix, mma) per warp per Q tile of FlashAttention-2's backward (the products above)."""
    loads = mma = 0
    for k, m, n, gemms in ((dim, block_k / key_groups[0], block_q / (warps / key_groups[0]), 2),
                           (block_q, block_k / key_groups[1], dim / (warps / key_groups[1]), 2),
                           (block_k, block_q / dq_groups, dim / (warps / dq_groups), 1)):
        loads += gemms * (k / 16) * (m / 16 + n / 16)
        mma += gemms * (k / 16) * (m / 16) * (n / 8)
    return loads, mma


def costs(args):
    _, _, ptx_payloads = read_libraries(args.libraries, args.sm)
    functions = {}
    for payload in ptx_payloads:
        text = decompress_ptx(payload)
        if text is None:
            print("kernel_static: the PTX in the fat binary is zstd-compressed and the zstd command is missing; "
                  "no cost table", file=sys.stderr)
            return 0
        functions.update(ptx_functions(text))
    names = demangle(sorted(functions))
    wanted = [m for m in functions if re.search(args.kernels, short(names[m]))]
    if not wanted:
        print(f"kernel_static: no kernel matching '{args.kernels}' in the PTX", file=sys.stderr)
        return 1
    columns = COLUMNS
    summary = []
    cells = [("kernel (main loop, per KV/Q tile)",) + tuple(columns) + ("ldmatrix/mma",)]
    for mangled in sorted(wanted, key=lambda m: short(names[m])):
        c = count(main_loop(functions[mangled]))
        mma = c["mma"][0]
        ratio = f"{c['ldmatrix'][0] / mma:.3f}" if mma else "-"
        cells.append((short(names[mangled]),) +
                     tuple(f"{c[k][0]}" + (f"+{c[k][1]}" if c[k][1] else "") for k in columns) + (ratio,))
        if args.rows and re.match(r"forward_(mma|fa2)_kernel<__nv_bfloat16", short(names[mangled])):
            summary.append(f"@row|gpu static (PTX)|{short(names[mangled])}: ldmatrix per mma.sync per K/V tile, static|"
                        f"{ratio}|FA2 design: {fa2_ldmatrix_per_mma(16):.3f} at 16 rows/warp, "
                        f"{fa2_ldmatrix_per_mma(32):.3f} at 32, {fa2_ldmatrix_per_mma(32, q_in_registers=False):.3f} "
                        "at 32 with Q re-read|-")
    print("Static instruction counts per iteration of each kernel's main loop (PTX from the built fat binary, "
          f"sm_{args.sm}): the loop is the backward branch whose body holds the most mma.sync; one iteration "
          "is one K/V tile (forward) or one Q tile (backward). 'a+b': a on every iteration, b under a branch some "
          "iterations skip (first-tile Q load, masking); ldmatrix/mma from the a's. Static counts, not timings; "
          "ptxas may still schedule or fuse them.")
    print_markdown(cells)
    print()
    print("FlashAttention-2 design (Dao 2023), ratios derived from its tile shapes (per K/V tile, per warp "
          "owning R query rows, BK keys, any D):")
    print("  mma = 2 (R/16)(BK/8)(D/16); ldmatrix = 2 (BK/16)(D/16) [K, V] + (R/16)(D/16) [Q, only if re-read]")
    print("  ldmatrix/mma = 8/R with Q in registers; (R/16 + 2 BK/16) / (2 (R/16)(BK/8)) with Q re-read per tile")
    for block_q, warps in ((128, 4), (64, 4)):
        rows = block_q // warps
        print(f"  {block_q} q x 64 k tile, {warps} warps, R = {rows}: Q in registers "
              f"{fa2_ldmatrix_per_mma(rows):.3f}, Q re-read {fa2_ldmatrix_per_mma(rows, q_in_registers=False):.3f}")
    print("  ringlab's forward (forward_fa2), 4 warps, R = 32, Q re-read every tile: 128 q x 128 k at D = 64 (FA2's "
          f"hdim-64 tile): {fa2_ldmatrix_per_mma(32, 128, q_in_registers=False):.3f} expected; 128 q x 64 k at "
          f"D = 128: {fa2_ldmatrix_per_mma(32, q_in_registers=False):.3f} expected")
    print("  ladder rung 05 (forward_mma): 64 q x 64 k, 4 warps, R = 16, Q in registers after the first tile: "
          f"{fa2_ldmatrix_per_mma(16):.3f} expected")
    print("FlashAttention-2's backward, per Q tile (128 keys, 8 warps; warp tiles: S^T and dP^T 32 keys x BQ/2 "
          "queries, dK and dV 32 keys x D/2, dQ 32 queries x 32 dims):")
    print(f"  its hdim-128 tile, 64 q x 128 k: {fa2_backward_ldmatrix_per_mma(128, 64):.3f}; ringlab's backward_mma "
          f"at D = 128 (the same tile): {fa2_backward_ldmatrix_per_mma(128, 64):.3f} expected, at D = 64 (128 q x "
          f"128 k, dQ 4 query groups): {fa2_backward_ldmatrix_per_mma(64, 128, dq_groups=4):.3f} expected")
    for row in summary:
        print(row)
    return 0


# ---- sass -----------------------------------------------------------------------------------------

# The backward's main loop runs one Q tile: its HMMA and LDSM are FlashAttention-2's per warp for the
# tile shape (backward_mma.cuh: BQ = 64 at D = 128 and 128 at D = 64, 128 keys, 8 warps; dQ in 2 or 4
# query groups). A decoded loop that does not hold exactly these is a decoding error, not a kernel.
BACKWARD_TILES = {128: dict(block_q=64, dq_groups=2), 64: dict(block_q=128, dq_groups=4)}
# Its P^T and dS^T reach shared memory by stmatrix.x4 only: per warp and tile 2 (P^T, dS^T) x 2 (m-tiles)
# x BQ/32 (n-tile pairs) = BQ/8, and no 32-bit STS (the four per x4 it replaced).
def backward_stsm(block_q):
    return block_q // 8


def backward_loop_problems(name, loop):
    """What is wrong with a backward_mma kernel's decoded main loop (opcode counts), against its tile:
    HMMA and LDSM FlashAttention-2's (a mismatch is a decoding error), P^T and dS^T stored by STSM only."""
    m = re.match(r"backward_mma_kernel<[^,]+, (\d+)>", name)
    if not m or int(m.group(1)) not in BACKWARD_TILES:
        return []
    tiles, problems = BACKWARD_TILES[int(m.group(1))], []
    loads, mma = fa2_backward_counts(int(m.group(1)), **tiles)
    if (loop["HMMA"], loop["LDSM"]) != (mma, loads):
        problems.append(f"{name}: the decoded loop holds {loop['HMMA']} HMMA and {loop['LDSM']} LDSM, the tile "
                        f"{int(mma)} and {int(loads)}")
    stsm = backward_stsm(tiles["block_q"])
    if (loop["STS"], loop["STSM"]) != (0, stsm):
        problems.append(f"{name}: the loop stores P^T and dS^T with {loop['STS']} STS and {loop['STSM']} STSM, "
                        f"the tile's stmatrix.x4 are {stsm} and no STS")
    return problems


def sass_table(args):
    kernels, _, _ = read_libraries(args.libraries, args.sm)
    names = demangle(sorted(kernels))
    wanted = sorted((m for m in kernels if re.search(args.kernels, short(names[m]))), key=lambda m: short(names[m]))
    if not wanted:
        print(f"kernel_static: no sm_{args.sm} kernel matching '{args.kernels}'", file=sys.stderr)
        return 1
    print(f"SASS of each kernel (sm_{args.sm}, decoded from the built cubins; kernel_static.py's head comment): "
          "instructions in all and in the main loop (the smallest loop holding every HMMA; one iteration is one "
          "K/V tile forward, one Q tile backward), static counts: a loop's branches that some tiles skip (masking) "
          "are counted too.")
    cells = [("kernel", "SASS", "main loop", "HMMA", "LDSM", "STS / STSM", "per HMMA", "local mem in / out of loop",
              "top of the loop")]
    problems, summary = [], []
    for mangled in wanted:
        name = short(names[mangled])
        sass = sass_summary(kernels[mangled]["text"])
        if not sass["main_loop"]:
            if sass["hmma"]:  # a kernel without tensor-core instructions has no main loop to find
                problems.append(f"{name}: no loop holding all {sass['hmma']} HMMA decoded")
            cells.append((name, str(sass["total"]), "-", str(sass["hmma"]), "-", "-", "-", "-", "-"))
            continue
        loop = sass["loop"]
        top = ", ".join(f"{op} {n}" for op, n in loop.most_common(args.top) if op not in ("HMMA", "LDSM", "STS", "STSM"))
        per = sass["loop_total"] / loop["HMMA"]
        cells.append((name, str(sass["total"]), str(sass["loop_total"]), str(loop["HMMA"]), str(loop["LDSM"]),
                      f"{loop['STS']} / {loop['STSM']}", f"{per:.2f}", f"{sass['local_in_loop']} / {sass['local_outside']}", top))
        if sass["local_in_loop"]:
            problems.append(f"{name}: {sass['local_in_loop']} local-memory accesses in the main loop")
        problems += backward_loop_problems(name, loop)
        if args.rows and name.startswith("backward_mma_kernel<__nv_bfloat16"):
            summary.append(f"@row|gpu static (SASS)|{name}: SASS instructions per HMMA in the main loop (static)|"
                           f"{per:.2f}|-|-")
    print_markdown(cells, left=(0, 8))
    for row in summary:
        print(row)
    for p in problems:
        print("FAIL: " + p)
    return 1 if problems else 0


# ---- self-test ------------------------------------------------------------------------------------

SYNTHETIC_SPILL = """\
ptxas info    : Compiling entry function '_ZN7ringlab3gpu18forward_mma_kernelI13__nv_bfloat16Li128EEEvNS0_13ForwardParamsE' for 'sm_90'
ptxas info    : Function properties for _ZN7ringlab3gpu18forward_mma_kernelI13__nv_bfloat16Li128EEEvNS0_13ForwardParamsE
    24 bytes stack frame, 24 bytes spill stores, 16 bytes spill loads
ptxas info    : Used 255 registers, used 1 barriers
ptxas info    : Compiling entry function '_ZN7ringlab3gpu19forward_fp32_kernelENS0_13ForwardParamsE' for 'sm_90'
ptxas info    : Function properties for _ZN7ringlab3gpu19forward_fp32_kernelENS0_13ForwardParamsE
    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 128 registers, used 1 barriers, 1024 bytes smem
"""


def self_test(_args):
    failures = []

    def expect(what, condition):
        print(("ok   " if condition else "FAIL ") + what)
        if not condition:
            failures.append(what)

    rows = parse_ptxas_log(SYNTHETIC_SPILL)
    expect("the synthetic ptxas log has two kernels", len(rows) == 2)
    expect("its names are demangled", rows[0]["name"] == "forward_mma_kernel<__nv_bfloat16, 128>")
    expect("the spill is read (40 bytes)", rows[0]["spill"] == 40 and rows[0]["stack"] == 24)
    expect("the static shared memory is read", rows[1]["static_smem"] == 1024)
    problems = check(rows)
    expect("a spilling kernel fails the check", any("spills" in p for p in problems))
    expect("its stack frame fails the check", any("stack frame" in p for p in problems))
    expect("the clean kernel passes", not any("fp32" in p for p in problems))
    clean = dict(name="k", registers=255, spill=0, stack=0, static_smem=1024, dynamic_smem=SMEM_LIMIT - 1024)
    expect("255 registers and exactly 227 KiB pass", not check([clean]))
    expect("256 registers fail", check([dict(clean, registers=256)]))
    expect("one byte over 227 KiB fails", check([dict(clean, dynamic_smem=SMEM_LIMIT - 1023)]))
    expect("shared memory without a record fails", check([dict(clean, dynamic_smem=None, uses_smem=True)]))
    expect("the records are found", smem_records(b"xx ringlab-smem:forward_mma_kernel<__half, 64>=40960\0yy")
           == {"forward_mma_kernel<__half, 64>": 40960})
    loop = ["mov.u32 %r1, 0;", "$L__BB0_2:", "@%p1 bra $L__BB0_3;", "mma.sync.aligned.m16n8k16 x;",
            "ldmatrix.sync.aligned.m8n8.x4.shared.b16 y;", "$L__BB0_3:", "ex2.approx.ftz.f32 z;",
            "@%p2 bra $L__BB0_2;", "ret;"]
    c = count(main_loop(loop))
    expect("the main loop is found and counted, the skippable part apart",
           c["mma"] == [0, 1] and c["ldmatrix"] == [0, 1] and c["ex2"] == [1, 0])
    atomics = count(["$L__BB0_1:", "red.global.add.v4.f32 [%rd1], {%f1, %f2, %f3, %f4};",
                     "red.global.add.f32 [%rd2], %f5;", "@%p1 bra $L__BB0_2;", "atom.global.add.f32 %f6, [%rd3], %f7;",
                     "$L__BB0_2:", "mma.sync.aligned.m16n8k16 x;", "bra.uni $L__BB0_1;"])
    expect("atomics count instructions; their floats count a vector red as its width",
           atomics["atomics"] == [2, 1] and atomics["atomic floats"] == [5, 1])
    expect("FA2's ratios: 0.3125 at 32 rows per warp with Q re-read (0.28125 with 128-key tiles), 0.5 at 16 with Q in registers",
           fa2_ldmatrix_per_mma(32, q_in_registers=False) == 0.3125 and fa2_ldmatrix_per_mma(16) == 0.5
           and fa2_ldmatrix_per_mma(32, 128, q_in_registers=False) == 0.28125)
    expect("FA2's backward: 144 ldmatrix per 320 mma at D = 128, 64 q x 128 k (and at D = 64, 128 x 128)",
           fa2_backward_ldmatrix_per_mma(128, 64) == 0.45 and fa2_backward_ldmatrix_per_mma(64, 128, dq_groups=4) == 0.45)
    expect("fp32 global loads are counted, 16-bit, int32 and shared ones are not",
           state_loads(["ld.global.f32 %f1, [%rd1];", "@%p3 ld.global.v2.f32 {%f1, %f2}, [%rd2];",
                        "ld.global.u32 %r1, [%rd3];", "ld.shared.f32 %f3, [%r2];", "st.global.f32 [%rd4], %f4;"]) == 2)
    # SASS: a synthetic kernel, its instructions encoded as the decoder reads them.
    opcode = {name: op for op, name in SASS_OPCODES.items()}

    def word(name, at=0, target=None, guard=GUARD_ALWAYS):
        w0, w1 = (0x987 if name == "STL" else opcode[name]) | guard << 12, 0
        if target is not None:  # 4 x bits 16..23 + 256 x bits 32..81 past the next instruction
            high, low = divmod(target - at - 16, 256)
            w0 |= (low // 4) << 16 | (high & 0xFFFFFFFF) << 32
            w1 |= (high >> 32) & ((1 << 18) - 1)
        return struct.pack("<QQ", w0, w1)

    def kernel(local_in_loop=False, loop_target=32):
        program = [("S2R",), ("STL",), ("HMMA",), ("LDSM",), ("LDL" if local_in_loop else "NOP",),
                   ("BRA", loop_target, 0x0), ("LDL",), ("EXIT",)]  # 0x0: guarded by P0
        return b"".join(word(p[0], 16 * i, *p[1:]) for i, p in enumerate(program))

    decoded = sass_instructions(word("NOP") * 0x40 + word("BRA", 0x400, 0x40) + word("BRA", 0x410, 0x2230, guard=0x9))
    expect("a BRA's target decodes, backward and forward, and a guard makes it conditional",
           decoded[0x40][3] == 0x40 and decoded[0x41][3] == 0x2230 and not decoded[0x40][2] and decoded[0x41][2])
    clean = sass_summary(kernel())
    expect("the synthetic loop is found: HMMA, LDSM, the no-op and its branch back",
           clean["main_loop"] and clean["loop_total"] == 4 and clean["loop"]["HMMA"] == 1)
    expect("its spill store before the loop and reload after it are outside the loop",
           clean["local_in_loop"] == 0 and clean["local_outside"] == 2)
    in_loop = sass_summary(kernel(local_in_loop=True))
    expect("a reload inside the loop is inside", in_loop["local_in_loop"] == 1 and in_loop["local_outside"] == 2)
    frame = dict(name="k", registers=255, spill=None, stack=8, static_smem=0, dynamic_smem=None)
    expect("an 8-byte frame whose accesses are all outside the main loop passes",
           not check([dict(frame, sass=clean)]))
    expect("the same frame with a reload in the loop fails",
           any("in the main loop" in p for p in check([dict(frame, sass=in_loop)])))
    expect("a 32-byte frame fails even outside the loop", check([dict(frame, stack=32, sass=clean)]))
    expect("a frame fails without decoded SASS (ptxas logs, kernels without HMMA)", check([dict(frame, sass=None)]))
    backward = collections.Counter(HMMA=320, LDSM=144, STSM=16)
    expect("the D = 64 backward's loop: 320 HMMA, 144 LDSM, 16 STSM pass",
           not backward_loop_problems("backward_mma_kernel<__half, 64>", backward))
    expect("... its P^T and dS^T stored by 64 STS (32-bit stores) fail",
           backward_loop_problems("backward_mma_kernel<__half, 64>", collections.Counter(HMMA=320, LDSM=144, STS=64)))
    expect("... and at D = 128 its 16 STSM are twice the tile's 8",
           backward_loop_problems("backward_mma_kernel<__half, 128>", backward))
    expect("STSM decodes", sass_instructions(word("STSM"))[0][1] == "STSM")
    lost = sass_summary(kernel(loop_target=0x10000))
    expect("a branch out of the kernel: no main loop, so no leeway",
           not lost["main_loop"] and check([dict(frame, sass=lost)]))
    print("self-test: " + ("FAILED" if failures else "passed"))
    return 1 if failures else 0


def state_loads(lines):
    """fp32 loads from global memory in a kernel's PTX (the forward's accumulator state is its only
    fp32 global input: Q, K, V are 16-bit, positions and document bounds int32)."""
    return sum(1 for line in lines if re.match(r"(@%p\d+\s+)?ld\.global(\.nc)?(\.v[24])?\.f32\b", line))


def fused_init(args):
    """The fused init's static evidence: forward_fa2_init_kernel<...> loads no fp32 state, where its
    twin forward_fa2_kernel<...> (same body, the state loaded) does (so the count can fail)."""
    _, _, ptx_payloads = read_libraries(args.libraries, args.sm)
    functions = {}
    for payload in ptx_payloads:
        text = decompress_ptx(payload)
        if text is None:
            print("kernel_static: the PTX in the fat binary is zstd-compressed and the zstd command is missing",
                  file=sys.stderr)
            return 77
        functions.update(ptx_functions(text))
    names = demangle(sorted(functions))
    loads = {short(names[m]): state_loads(lines) for m, lines in functions.items()
             if re.match(r"forward_fa2(_init)?_kernel<", short(names[m]))}
    failures = []
    starting = sorted(n for n in loads if n.startswith("forward_fa2_init_kernel<"))
    if not starting:
        failures.append("no forward_fa2_init_kernel in the PTX")
    for name in starting:
        twin = name.replace("forward_fa2_init_kernel<", "forward_fa2_kernel<")
        print(f"{name}: {loads[name]} fp32 global loads; {twin}: {loads.get(twin, '-')}")
        if loads[name] != 0:
            failures.append(f"{name} loads fp32 from global memory ({loads[name]} ld.global.f32): the state")
        if not loads.get(twin):
            failures.append(f"{twin} shows no state loads: the count finds nothing to tell them apart")
    for failure in failures:
        print("FAIL: " + failure)
    if not failures:
        print(f"OK: {len(starting)} forward_fa2_init_kernel instances load no fp32 state; their twins do")
    return 1 if failures else 0


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    r = sub.add_parser("resources")
    r.add_argument("libraries", nargs="+")
    r.add_argument("--sm", type=int, default=90)
    r.add_argument("--ptxas-log", help="check this `ptxas -v` output instead of the cubins")
    r.add_argument("--rows", action="store_true", help="also print scripts/bench's @row summary line")
    r.add_argument("--kernels", help="regex of the kernels to check (default: every kernel of the libraries)")
    c = sub.add_parser("costs")
    c.add_argument("libraries", nargs="+")
    c.add_argument("--sm", type=int, default=90)
    c.add_argument("--kernels", default="_(mma|fa2|fa2_init)_kernel",
                   help="regex of the kernels to count (default: tensor-core)")
    c.add_argument("--rows", action="store_true", help="also print scripts/bench's @row summary lines")
    f = sub.add_parser("fused-init")
    f.add_argument("libraries", nargs="+")
    f.add_argument("--sm", type=int, default=90)
    x = sub.add_parser("sass")
    x.add_argument("libraries", nargs="+")
    x.add_argument("--sm", type=int, default=90)
    x.add_argument("--kernels", default="_(mma|fa2|fa2_init)_kernel",
                   help="regex of the kernels to decode (default: tensor-core)")
    x.add_argument("--top", type=int, default=8, help="opcodes of the loop to list besides HMMA and LDSM")
    x.add_argument("--rows", action="store_true", help="also print scripts/bench's @row summary lines")
    sub.add_parser("self-test")
    args = parser.parse_args()
    return {"resources": resources, "costs": costs, "fused-init": fused_init, "sass": sass_table,
            "self-test": self_test}[args.command](args)


if __name__ == "__main__":
    sys.exit(main())
