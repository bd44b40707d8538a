//go:build !purego

#include "textflag.h"

// Each is one byte sixteen times, or (letters) a table the shuffle reads
// by a control character's low four bits: the letter its short escape
// ends in (\b \t \n \f \r), or 0 where it has none.
DATA quote<>+0(SB)/8, $0x2222222222222222
DATA quote<>+8(SB)/8, $0x2222222222222222
GLOBL quote<>(SB), RODATA|NOPTR, $16
DATA backslash<>+0(SB)/8, $0x5c5c5c5c5c5c5c5c
DATA backslash<>+8(SB)/8, $0x5c5c5c5c5c5c5c5c
GLOBL backslash<>(SB), RODATA|NOPTR, $16
DATA ctl<>+0(SB)/8, $0x1f1f1f1f1f1f1f1f
DATA ctl<>+8(SB)/8, $0x1f1f1f1f1f1f1f1f
GLOBL ctl<>(SB), RODATA|NOPTR, $16
DATA low<>+0(SB)/8, $0x0f0f0f0f0f0f0f0f
DATA low<>+8(SB)/8, $0x0f0f0f0f0f0f0f0f
GLOBL low<>(SB), RODATA|NOPTR, $16
DATA letters<>+0(SB)/8, $0
DATA letters<>+8(SB)/8, $0x00007266006e7462
GLOBL letters<>(SB), RODATA|NOPTR, $16

// func escapeBlocksSSSE3(dst, src *byte, blocks int, expand *[256][16]byte) (read, written int)
TEXT ·escapeBlocksSSSE3(SB), NOSPLIT, $0-48
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ blocks+16(FP), CX
	MOVQ expand+24(FP), R8
	MOVQ DI, R9
	MOVQ SI, R10
	MOVOU quote<>(SB), X8
	MOVOU backslash<>(SB), X9
	MOVOU ctl<>(SB), X10
	MOVOU low<>(SB), X11
	MOVOU letters<>(SB), X12
	PXOR X13, X13
	TESTQ CX, CX
	JZ done

loop:
	MOVOU (SI), X0
	PMOVMSKB X0, AX
	TESTL AX, AX
	JNZ done // a byte at or above 0x80

	// X1: the control characters; X2: every stop.
	MOVO X0, X1
	PSUBUSB X10, X1
	PCMPEQB X13, X1
	MOVO X0, X2
	PCMPEQB X8, X2
	MOVO X0, X3
	PCMPEQB X9, X3
	POR X3, X2
	POR X1, X2
	PMOVMSKB X2, AX
	TESTL AX, AX
	JNZ escape
	MOVOU X0, (DI)
	ADDQ $16, SI
	ADDQ $16, DI
	DECQ CX
	JNZ loop
	JMP done

escape:
	// X5: each control character's letter, 0 for one without a short
	// escape (and for bytes above 0x0f, whose low bits would pick a
	// wrong one).
	MOVO X0, X4
	PSUBUSB X11, X4
	PCMPEQB X13, X4
	MOVO X12, X5
	PSHUFB X0, X5
	PAND X4, X5
	MOVO X5, X6
	PCMPEQB X13, X6
	PAND X1, X6
	PMOVMSKB X6, BX
	TESTL BX, BX
	JNZ done // a control character written as \u00xx

	// X7: the block with each control character replaced by its letter,
	// the byte that follows its backslash.
	MOVO X0, X7
	PXOR X5, X7
	PAND X1, X7
	PXOR X0, X7

	// The low eight bytes, then the high eight: the shuffle picks each
	// output byte from the eight and eight backslashes.
	MOVO X7, X3
	PUNPCKLQDQ X9, X3
	MOVL AX, BX
	ANDL $0xff, BX
	POPCNTL BX, DX
	SHLQ $4, BX
	MOVOU (R8)(BX*1), X4
	PSHUFB X4, X3
	MOVOU X3, (DI)
	LEAQ 8(DI)(DX*1), DI

	MOVO X7, X3
	PUNPCKHQDQ X9, X3
	MOVL AX, BX
	SHRL $8, BX
	POPCNTL BX, DX
	SHLQ $4, BX
	MOVOU (R8)(BX*1), X4
	PSHUFB X4, X3
	MOVOU X3, (DI)
	LEAQ 8(DI)(DX*1), DI

	ADDQ $16, SI
	DECQ CX
	JNZ loop

done:
	SUBQ R10, SI
	MOVQ SI, read+32(FP)
	SUBQ R9, DI
	MOVQ DI, written+40(FP)
	RET
