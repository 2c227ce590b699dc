// A seccomp filter for tenants' code: the system calls no application needs and that widen what an
// escape can reach (kernel modules, mounts, keyrings, BPF, perf, ptrace and reading other processes'
// memory, io_uring, namespaces) answer EPERM; everything else is allowed. It is a classic BPF program
// (struct sock_filter: u16 code, u8 jt, u8 jf, u32 k, little endian) that bubblewrap loads with
// `--seccomp <fd>` just before it runs the command, after its own setup (which needs namespaces).
// Built here rather than with libseccomp so that nothing is compiled or installed for it.
//
// x86_64 only: system call numbers differ per architecture, and a program for the wrong one would
// allow what it means to deny. Elsewhere seccompProgram() returns undefined and the sandbox runs
// without a filter (docs/security.md). On x86_64, calls through the i386 (int 0x80) and x32 ABIs are
// refused altogether: their numbers would bypass the list.

/** The kernel's audit architecture of x86_64 (EM_X86_64 | __AUDIT_ARCH_64BIT | __AUDIT_ARCH_LE). */
const AUDIT_ARCH_X86_64 = 0xc000003e;
/** x32 ABI calls are x86_64 numbers with this bit set. */
const X32_SYSCALL_BIT = 0x40000000;

const EPERM = 1;
const ENOSYS = 38;

/** Refused with EPERM, by x86_64 number. */
export const DENIED_SYSCALLS: Readonly<Record<string, number>> = {
  // Other processes: tracing, reading or writing their memory, comparing their descriptors.
  ptrace: 101,
  process_vm_readv: 310,
  process_vm_writev: 311,
  // File systems: mounting (old and new API), changing the root, file handles that bypass paths.
  mount: 165,
  umount2: 166,
  pivot_root: 155,
  open_tree: 428,
  move_mount: 429,
  fsopen: 430,
  fsconfig: 431,
  fsmount: 432,
  fspick: 433,
  mount_setattr: 442,
  name_to_handle_at: 303,
  open_by_handle_at: 304,
  // Namespaces (clone with namespace flags is checked below).
  unshare: 272,
  setns: 308,
  // The kernel itself: modules, kexec, reboot, swap, accounting, quotas, its log, port I/O.
  init_module: 175,
  finit_module: 313,
  delete_module: 176,
  kexec_load: 246,
  kexec_file_load: 320,
  reboot: 169,
  swapon: 167,
  swapoff: 168,
  acct: 163,
  quotactl: 179,
  quotactl_fd: 443,
  syslog: 103,
  iopl: 172,
  ioperm: 173,
  // Large attack surfaces no application needs.
  keyctl: 250,
  add_key: 248,
  request_key: 249,
  bpf: 321,
  perf_event_open: 298,
  userfaultfd: 323,
  io_uring_setup: 425,
  io_uring_enter: 426,
  io_uring_register: 427,
};

/**
 * Refused with ENOSYS, so the C library falls back to an older call the filter can inspect: clone3
 * passes its flags in memory, which a filter cannot read; glibc then uses clone.
 */
const UNSUPPORTED_SYSCALLS: Readonly<Record<string, number>> = { clone3: 435 };

const CLONE = 56;
/** CLONE_NEWNS, NEWCGROUP, NEWUTS, NEWIPC, NEWUSER, NEWPID, NEWNET: a clone making a namespace. */
const CLONE_NAMESPACE_FLAGS = 0x7e020000;
const PERSONALITY = 135;
/**
 * The personalities allowed (as Docker's default profile): Linux, Linux32, with UNAME26, and the
 * query. Others (ADDR_NO_RANDOMIZE, READ_IMPLIES_EXEC) weaken the process's own defences.
 */
const PERSONALITIES = [0x0, 0x8, 0x20000, 0x20008, 0xffffffff];

// struct seccomp_data: int nr; u32 arch; u64 instruction_pointer; u64 args[6].
const NR_OFFSET = 0;
const ARCH_OFFSET = 4;
/** The low 32 bits of the first argument (little endian). */
const ARG0_LOW_OFFSET = 16;

// Classic BPF opcodes.
const LD_W_ABS = 0x20; // BPF_LD | BPF_W | BPF_ABS
const JEQ_K = 0x15; // BPF_JMP | BPF_JEQ | BPF_K
const JGE_K = 0x35; // BPF_JMP | BPF_JGE | BPF_K
const JSET_K = 0x45; // BPF_JMP | BPF_JSET | BPF_K
const RET_K = 0x06; // BPF_RET | BPF_K

const SECCOMP_RET_ALLOW = 0x7fff0000;
const SECCOMP_RET_ERRNO = 0x00050000;

type Label = 'allow' | 'eperm' | 'enosys' | 'clone' | 'personality';
interface Instruction {
  code: number;
  k: number;
  /** Where a jump goes when the test holds, and when it does not (undefined: the next instruction). */
  jt?: Label;
  jf?: Label;
  label?: Label;
}

/** The filter for this machine's architecture, or undefined where Berth has none (not x86_64). */
export function seccompProgram(arch: string = process.arch): Buffer | undefined {
  return arch === 'x64' ? assemble(x86_64Program()) : undefined;
}

function x86_64Program(): Instruction[] {
  const load = (offset: number): Instruction => ({ code: LD_W_ABS, k: offset });
  const ret = (k: number, label?: Label): Instruction => ({ code: RET_K, k, ...(label ? { label } : {}) });
  return [
    load(ARCH_OFFSET),
    { code: JEQ_K, k: AUDIT_ARCH_X86_64, jf: 'eperm' },
    load(NR_OFFSET),
    { code: JGE_K, k: X32_SYSCALL_BIT, jt: 'eperm' },
    ...Object.values(DENIED_SYSCALLS).map((nr): Instruction => ({ code: JEQ_K, k: nr, jt: 'eperm' })),
    ...Object.values(UNSUPPORTED_SYSCALLS).map((nr): Instruction => ({ code: JEQ_K, k: nr, jt: 'enosys' })),
    { code: JEQ_K, k: CLONE, jt: 'clone' },
    { code: JEQ_K, k: PERSONALITY, jt: 'personality' },
    ret(SECCOMP_RET_ALLOW),
    { ...load(ARG0_LOW_OFFSET), label: 'clone' },
    { code: JSET_K, k: CLONE_NAMESPACE_FLAGS, jt: 'eperm', jf: 'allow' },
    { ...load(ARG0_LOW_OFFSET), label: 'personality' },
    ...PERSONALITIES.map((value): Instruction => ({ code: JEQ_K, k: value, jt: 'allow' })),
    ret(SECCOMP_RET_ERRNO | EPERM),
    ret(SECCOMP_RET_ALLOW, 'allow'),
    ret(SECCOMP_RET_ERRNO | EPERM, 'eperm'),
    ret(SECCOMP_RET_ERRNO | ENOSYS, 'enosys'),
  ];
}

/** The program as the kernel reads it: jumps resolved to forward offsets, 8 bytes an instruction. */
function assemble(program: Instruction[]): Buffer {
  const at = new Map<Label, number>();
  program.forEach((instruction, index) => {
    if (instruction.label) at.set(instruction.label, index);
  });
  const offset = (from: number, label: Label | undefined): number => {
    if (label === undefined) return 0;
    const distance = at.get(label)! - from - 1;
    if (distance < 0 || distance > 255) throw new Error(`seccomp jump to ${label} out of range`);
    return distance;
  };
  const out = Buffer.alloc(program.length * 8);
  program.forEach((instruction, index) => {
    out.writeUInt16LE(instruction.code, index * 8);
    out.writeUInt8(offset(index, instruction.jt), index * 8 + 2);
    out.writeUInt8(offset(index, instruction.jf), index * 8 + 3);
    out.writeUInt32LE(instruction.k >>> 0, index * 8 + 4);
  });
  return out;
}
