#!/usr/bin/env bash
# session 6, call 1: interleaved gemm v14/v15 vs cuBLAS; SASS of v14/v15 plain; outer_add 4x2^26 experiments + ncu; v17 8x28672 splits + ncu
# (ran on branch exp1 = main + env knobs HK_EXP_UNROLL/HK_EXP_BLOCKED/HK_EXP_GRIDMUL in outer_add v02 and HK_V17_SPLIT/HK_V17_NARROW in v17; the knobs were not merged)
set -uo pipefail
T0=$SECONDS
tar xzf build/carry/prebuilt.tgz
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/local/cuda/extras/CUPTI/lib64:$PWD/build/carry/lib
export HK_CACHE_DIR=/tmp/hkc
B=build/ci; S=$OUT/summary.txt; L=/tmp/logs; mkdir -p $L
say() { echo "$* [$((SECONDS-T0))s]" >> $S; }
nvidia-smi --query-gpu=name,uuid,clocks.sm,temperature.gpu,power.draw --format=csv > $S
# SASS in the background (CPU only)
( cuobjdump -sass $B/src/libhopperkit.so > /tmp/all.sass 2>/tmp/cuobjdump.err; python3 - <<'PY'
import re
txt=open('/tmp/all.sass').read()
parts=re.split(r'\n\s*Function : ', txt)
import os; os.makedirs('/tmp/sass', exist_ok=True)
names=[]
for p in parts[1:]:
    name=p.split('\n',1)[0].strip()
    if ('gemm_v14_kernel' in name or 'gemm_v15_kernel' in name) and '13__nv_bfloat16Lb0ELb1E' in name:
        names.append(name)
        body=re.sub(r'/\*[0-9a-f]{4,}\*/','',p)
        open('/tmp/sass/%03d.sass'%len(names),'w').write(name+'\n'+body)
open('/tmp/sass/names.txt','w').write('\n'.join(names))
PY
tar czf $OUT/sass.tgz -C /tmp sass ) &
SASS_PID=$!
timeout --signal=INT --kill-after=10 150 $B/hk bench gemm --variant 'v1[45]*' --dtype bf16,f16 --budget-ms 120 --json $L/bench-gemm.json > /dev/null 2> $L/bench-gemm.err
say "gemm interleaved rc=$?"; grep -a -o '| gemm | .*' $L/bench-gemm.err | cut -d'|' -f3-6,11 >> $S
for u in 4 2 8; do for bl in 0 1; do
  HK_EXP_UNROLL=$u HK_EXP_BLOCKED=$bl timeout --signal=INT 40 $B/hk bench outer_add --variant 'v02*' --shape 4x67108864 --shape 4x67125248 --dtype bf16,f32 --budget-ms 20 --json $L/outer-u$u-b$bl.json > /dev/null 2> $L/outer-u$u-b$bl.err
  say "outer u=$u blocked=$bl rc=$?"; grep -a -o '| outer_add | v02.*' $L/outer-u$u-b$bl.err | cut -d'|' -f3-5,9 >> $S
done; done
HK_EXP_GRIDMUL=2 timeout --signal=INT 40 $B/hk bench outer_add --variant 'v02*' --shape 4x67108864 --dtype bf16,f32 --budget-ms 20 > /dev/null 2> $L/outer-g2.err
say "outer gridmul2 rc=$?"; grep -a -o '| outer_add | v02.*' $L/outer-g2.err | cut -d'|' -f3-5,9 >> $S
for sp in 1 2 4; do
  HK_V17_SPLIT=$sp timeout --signal=INT 40 $B/hk bench gemm --variant 'v1[67]*' --shape 8x28672x4096 --shape 16x14336x4096 --dtype bf16 --budget-ms 40 > /dev/null 2> $L/v17-s$sp.err
  say "v17 split=$sp rc=$?"; grep -a -o '| gemm | .*' $L/v17-s$sp.err | cut -d'|' -f3-6,11 >> $S
done
HK_V17_NARROW=1 HK_V17_SPLIT=1 timeout --signal=INT 40 $B/hk bench gemm --variant 'v17*' --shape 8x28672x4096 --dtype bf16 --budget-ms 40 > /dev/null 2> $L/v17-n1.err
say "v17 narrow s1 rc=$?"; grep -a -o '| gemm | .*' $L/v17-n1.err | cut -d'|' -f3-6,11 >> $S
timeout 120 $B/hk profile --ncu outer_add --variant v02_vectorized --shape 4x67108864 --dtype bf16 > $OUT/ncu-outer.txt 2>&1
say "ncu outer rc=$?"
timeout 100 $B/hk profile --ncu gemm --variant v17_skinny_m_splitk --shape 8x28672x4096 --dtype bf16 > $OUT/ncu-v17-8x28672.txt 2>&1
say "ncu v17 a rc=$?"
timeout 100 $B/hk profile --ncu gemm --variant v17_skinny_m_splitk --shape 16x14336x4096 --dtype bf16 > $OUT/ncu-v17-16x14336.txt 2>&1
say "ncu v17 b rc=$?"
wait $SASS_PID; say "sass done"
tar czf $OUT/logs.tgz -C /tmp logs cuobjdump.err 2>/dev/null
cp $L/bench-gemm.json $OUT/
