use super::*;

fn sampler(params: SamplingParams) -> Sampler {
    Sampler::new(params).unwrap()
}

#[test]
fn greedy_picks_the_largest_finite_logit() {
    let mut s = sampler(SamplingParams::default());
    let mut logits = [0.5, f32::NEG_INFINITY, 2.0, 1.0];
    assert_eq!(s.sample(&mut logits, &[]), Ok(2));
}

#[test]
fn all_masked_is_an_error_not_a_draw() {
    let mut greedy = sampler(SamplingParams::default());
    let mut logits = [f32::NEG_INFINITY; 4];
    assert_eq!(greedy.sample(&mut logits, &[]), Err(SamplingError::NothingToSample));
    let mut hot = sampler(SamplingParams {
        temperature: 1.0,
        ..Default::default()
    });
    assert_eq!(hot.sample(&mut logits, &[]), Err(SamplingError::NothingToSample));
}

#[test]
fn masked_tokens_are_never_drawn() {
    let mut s = sampler(SamplingParams {
        temperature: 5.0,
        seed: 7,
        ..Default::default()
    });
    for _ in 0..2000 {
        let mut logits = [1.0, f32::NEG_INFINITY, 1.0, f32::NEG_INFINITY];
        let token = s.sample(&mut logits, &[]).unwrap();
        assert!(token == 0 || token == 2, "drew masked token {token}");
    }
}

#[test]
fn same_seed_same_tokens() {
    let draw = |seed| {
        let mut s = sampler(SamplingParams {
            temperature: 1.0,
            seed,
            ..Default::default()
        });
        (0..50)
            .map(|_| s.sample(&mut [0.0, 0.1, 0.2, 0.3, 0.4], &[]).unwrap())
            .collect::<Vec<_>>()
    };
    assert_eq!(draw(3), draw(3));
    assert_ne!(draw(3), draw(4));
}

#[test]
fn top_k_one_is_greedy_and_top_k_limits_support() {
    let mut s = sampler(SamplingParams {
        temperature: 2.0,
        top_k: 2,
        seed: 1,
        ..Default::default()
    });
    for _ in 0..500 {
        let token = s.sample(&mut [3.0, 0.0, 2.9, 1.0], &[]).unwrap();
        assert!(token == 0 || token == 2);
    }
}

#[test]
fn top_p_keeps_the_smallest_sufficient_prefix() {
    // probabilities ≈ [0.64, 0.24, 0.09, 0.03]: top_p 0.6 keeps only token 0
    let mut s = sampler(SamplingParams {
        temperature: 1.0,
        top_p: 0.6,
        seed: 5,
        ..Default::default()
    });
    for _ in 0..200 {
        assert_eq!(s.sample(&mut [3.0, 2.0, 1.0, 0.0], &[]).unwrap(), 0);
    }
}

#[test]
fn min_p_drops_unlikely_tokens() {
    // p(1)/p(0) = e^-1 ≈ 0.37 survives min_p 0.3; p(2)/p(0) = e^-4 does not
    let mut s = sampler(SamplingParams {
        temperature: 1.0,
        min_p: 0.3,
        seed: 9,
        ..Default::default()
    });
    let mut seen = [false; 3];
    for _ in 0..2000 {
        seen[s.sample(&mut [4.0, 3.0, 0.0], &[]).unwrap() as usize] = true;
    }
    assert_eq!(seen, [true, true, false]);
}

#[test]
fn repetition_penalty_shrinks_seen_tokens_once() {
    let mut logits = [2.0, -2.0, 2.0];
    apply_repetition_penalty(&mut logits, &[0, 0, 1], 2.0);
    assert_eq!(logits, [1.0, -4.0, 2.0]);
}

#[test]
fn invalid_parameters_name_the_field() {
    let cases = [
        (
            SamplingParams {
                temperature: -1.0,
                ..Default::default()
            },
            "temperature",
        ),
        (
            SamplingParams {
                temperature: f32::NAN,
                ..Default::default()
            },
            "temperature",
        ),
        (
            SamplingParams {
                top_p: 0.0,
                ..Default::default()
            },
            "top_p",
        ),
        (
            SamplingParams {
                min_p: 1.5,
                ..Default::default()
            },
            "min_p",
        ),
        (
            SamplingParams {
                repetition_penalty: 0.0,
                ..Default::default()
            },
            "repetition_penalty",
        ),
    ];
    for (params, field) in cases {
        match Sampler::new(params) {
            Err(SamplingError::InvalidParameter { field: got, .. }) => assert_eq!(got, field),
            other => panic!("expected an error for {field}, got {other:?}"),
        }
    }
}

#[test]
fn a_mask_applies_before_everything_and_empty_is_an_error() {
    let mut hot = sampler(SamplingParams {
        temperature: 2.0,
        top_k: 2,
        seed: 3,
        ..Default::default()
    });
    // Top-k = 2 would keep tokens 0 and 1; the mask leaves only 2 and 3.
    for _ in 0..500 {
        let mut logits = [9.0, 8.0, 1.0, 0.5];
        let token = hot.sample_allowed(&mut logits, &[], |t| t >= 2).unwrap();
        assert!(token >= 2, "drew masked token {token}");
    }
    let mut logits = [1.0, 2.0];
    assert_eq!(
        hot.sample_allowed(&mut logits, &[], |_| false),
        Err(SamplingError::EmptyMask)
    );
}

#[test]
fn a_tiny_temperature_samples_greedily_instead_of_through_a_nan_softmax() {
    // 1/1e-45 is infinite: the softmax was NaN and the draw an unlikely token.
    for temperature in [f32::MIN_POSITIVE, 1e-45, 1e-10, GREEDY_BELOW_TEMPERATURE / 2.0] {
        let mut s = sampler(SamplingParams {
            temperature,
            seed: 3,
            ..SamplingParams::default()
        });
        for _ in 0..20 {
            let mut logits = vec![0.5, 3.0, 2.9, -1.0];
            assert_eq!(s.sample(&mut logits, &[]).unwrap(), 1, "temperature {temperature}");
        }
    }
    let at_floor = SamplingParams {
        temperature: GREEDY_BELOW_TEMPERATURE,
        ..SamplingParams::default()
    };
    assert!(!at_floor.is_greedy(), "the floor itself samples");
}

#[test]
fn edge_values_of_top_p_min_p_and_temperature() {
    let logits = [1.0, 0.9, 0.8, -30.0];
    let draws = |params: SamplingParams| -> std::collections::BTreeSet<u32> {
        let mut s = sampler(params);
        (0..400).map(|_| s.sample(&mut logits.to_vec(), &[]).unwrap()).collect()
    };
    let base = SamplingParams {
        temperature: 1.0,
        seed: 11,
        ..SamplingParams::default()
    };
    // top_p = 1 keeps everything; the smallest valid top_p keeps only the top token.
    assert!(draws(base.clone()).len() >= 3);
    let tiny_p = SamplingParams {
        top_p: f32::MIN_POSITIVE,
        ..base.clone()
    };
    assert_eq!(draws(tiny_p), [0].into());
    // min_p = 1 keeps only tokens as likely as the top one; 0 disables it.
    let all_min = SamplingParams {
        min_p: 1.0,
        ..base.clone()
    };
    assert_eq!(draws(all_min), [0].into());
    // The highest temperature flattens but never draws a non-finite logit.
    let hot = SamplingParams {
        temperature: 100.0,
        ..base.clone()
    };
    assert_eq!(draws(hot).len(), 4);
    // Outside the ranges: refused with the field named.
    for (field, params) in [
        (
            "top_p",
            SamplingParams {
                top_p: 0.0,
                ..base.clone()
            },
        ),
        (
            "top_p",
            SamplingParams {
                top_p: 1.0001,
                ..base.clone()
            },
        ),
        (
            "min_p",
            SamplingParams {
                min_p: -0.1,
                ..base.clone()
            },
        ),
        (
            "temperature",
            SamplingParams {
                temperature: -1e-45,
                ..base.clone()
            },
        ),
        (
            "temperature",
            SamplingParams {
                temperature: f32::NAN,
                ..base.clone()
            },
        ),
    ] {
        match Sampler::new(params) {
            Err(SamplingError::InvalidParameter { field: named, .. }) => assert_eq!(named, field),
            other => panic!("{field}: {other:?}"),
        }
    }
}

mod properties {
    use super::*;
    use proptest::prelude::*;

    /// A logit: mostly ordinary values, some extreme finite ones, some masked.
    fn logit() -> impl Strategy<Value = f32> {
        prop_oneof![
            6 => -50.0f32..50.0,
            1 => prop_oneof![Just(f32::MAX), Just(-f32::MAX), Just(f32::MIN_POSITIVE), Just(0.0)],
            2 => Just(f32::NEG_INFINITY),
        ]
    }

    fn params() -> impl Strategy<Value = SamplingParams> {
        (
            prop_oneof![Just(0.0f32), 0.0f32..1e-3, 1e-3f32..100.0, Just(1e-45), Just(100.0)],
            0usize..8,
            prop_oneof![Just(1.0f32), Just(f32::MIN_POSITIVE), 1e-6f32..1.0],
            prop_oneof![Just(0.0f32), Just(1.0), 0.0f32..1.0],
            prop_oneof![Just(1.0f32), 0.05f32..10.0],
            any::<u64>(),
        )
            .prop_map(
                |(temperature, top_k, top_p, min_p, repetition_penalty, seed)| SamplingParams {
                    temperature,
                    top_k,
                    top_p,
                    min_p,
                    repetition_penalty,
                    seed,
                },
            )
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2_000))]

        /// Every draw is an allowed token whose logit (after the penalty) is
        /// finite; only a vector with nothing drawable is an error.
        #[test]
        fn every_draw_is_an_allowed_finite_token(
            logits in proptest::collection::vec(logit(), 1..64),
            allowed_bits in any::<u64>(),
            history in proptest::collection::vec(0u32..64, 0..8),
            params in params(),
        ) {
            let allowed = |token: u32| allowed_bits >> (token % 64) & 1 == 1;
            let mut sampler = Sampler::new(params).unwrap();
            let mut after = logits.clone();
            match sampler.sample_allowed(&mut after, &history, allowed) {
                Ok(token) => {
                    prop_assert!(allowed(token), "token {} is masked", token);
                    prop_assert!(after[token as usize].is_finite(), "token {} has logit {}", token, after[token as usize]);
                }
                Err(SamplingError::EmptyMask | SamplingError::NothingToSample) => {
                    let mut penalized = logits.clone();
                    apply_repetition_penalty(&mut penalized, &history, sampler.params().repetition_penalty);
                    let drawable = penalized
                        .iter()
                        .enumerate()
                        .any(|(t, l)| allowed(t as u32) && l.is_finite());
                    prop_assert!(!drawable, "a drawable token was refused");
                }
                Err(other) => prop_assert!(false, "unexpected {:?}", other),
            }
        }
    }
}
