#!/usr/bin/env bash
# Draws docs/quality_bleu.png (docs/quality.md) from the records in docs/quality_runs/ and the measured points of
# that page's tables: bash tools/quality_bleu_figure.sh  (OUT=path to write elsewhere)
set -euo pipefail
OUT="${OUT:-docs/quality_bleu.png}"
python tools/quality_bleu.py --output "$OUT" --line "OPUS-MT de-en (reported)=40.5" --line "42 BLEU=42" \
  "earlier recipe (no word dropout), 2-core x86-64=23.9,37.98,56.83" "earlier recipe (no word dropout), 2-core x86-64=26.8,38.77,57.60" \
  "earlier recipe (no word dropout), 2-core x86-64=56.2,41.24,60.11" "earlier recipe (no word dropout), 2-core x86-64=86.7,41.52,60.56" \
  "earlier recipe (no word dropout), 2-core x86-64=87.0,41.69,60.77" \
  "earlier recipe (no word dropout), AMD EPYC=docs/quality_runs/fast_r60" "earlier recipe (no word dropout), AMD EPYC=docs/quality_runs/fast_s0" \
  "one model, AMD EPYC=docs/quality_runs/fast_w10_r30" "one model, AMD EPYC=docs/quality_runs/fast_w10_r60" \
  "one model, AMD EPYC=docs/quality_runs/fast_w10" "one model, AMD EPYC=docs/quality_runs/fast_w10_s1" \
  "one member alone, AMD EPYC=docs/quality_runs/fast_w10_r44_s0" "one member alone, AMD EPYC=docs/quality_runs/fast_w10_r44_s1" \
  "the recipe: two members as one, AMD EPYC=docs/quality_runs/fast_ens2_r44" "the recipe: two members as one, AMD EPYC=docs/quality_runs/fast_ens2_r14" \
  "the recipe, seeds 2 + 3, AMD EPYC with AVX-512=85.0,42.62,61.32" \
  "one model, AMD EPYC without AVX-512 (3.3x slower)=86.9,40.37,59.19" "one model, AMD EPYC without AVX-512 (3.3x slower)=81.4,39.66,58.74" \
  "earlier recipe without label smoothing=23.9,37.88,56.54" \
  "earlier recipe without shared vocabulary and embeddings=24.2,36.85,55.25" "earlier recipe without shared vocabulary and embeddings=27.3,37.87,56.79" \
  "earlier recipe without dropout=26.0,38.62,57.84" "earlier recipe with inverse-sqrt decay instead of cosine=27.6,34.90,56.08" \
  "keras.io KerasHub example=85.3,25.03,50.17"
