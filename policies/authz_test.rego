# opa test policies/ -v   (loads authz.rego and default.json as data)
package authz_test

import data.authz
import rego.v1

practice := {
	"version": "1.1",
	"client_registration_data": {
		"client_id": "c-1",
		"product_id": "terminus-client",
		"product_version": "0.1.0",
		"platform": "linux",
		"posture_type": "software",
		"registration_timestamp": 1767225600,
		"attestation_timestamp": 1767225600,
		"device_info": {"os": "Linux", "os_version": "6.1"},
		"attestation_result": {"software": {"arch": "x64", "binding_verified": true}},
	},
	"user_info": {
		"identifier": "1-2-PRAXIS",
		"professionOID": "1.2.276.0.76.4.50",
		"commonName": "Praxis Dr. Test",
		"repository_owner": false,
	},
	"authorization_request": {
		"scopes": ["system/Slot.rs", "system/Appointment.crus"],
		"resource": "http://localhost:8080/fhir",
		"audience": ["http://localhost:8080/fhir"],
		"grant_type": "urn:ietf:params:oauth:grant-type:token-exchange",
		"ip_address": "127.0.0.1",
		"http_method": "POST",
	},
	"delegation_context": null,
}

with_user(u) := object.union(practice, {"user_info": u})

with_scopes(s) := object.union(practice, {"authorization_request": {"scopes": s}})

test_a_practice_with_default_scopes_is_allowed if {
	authz.allow with input as practice
}

test_allow_carries_the_token_lifetimes if {
	authz.ttl == {"access_token": 300, "refresh_token": 86400} with input as practice
}

test_allow_has_no_reasons if {
	count(authz.reasons) == 0 with input as practice
}

allowed_for_profession(oid) if authz.allow with input as with_user({"professionOID": oid})

test_professions_50_to_55_are_allowed if {
	every oid in ["1.2.276.0.76.4.50", "1.2.276.0.76.4.51", "1.2.276.0.76.4.52", "1.2.276.0.76.4.53", "1.2.276.0.76.4.54", "1.2.276.0.76.4.55"] {
		allowed_for_profession(oid)
	}
}

test_an_unknown_profession_is_denied if {
	not authz.allow with input as with_user({"professionOID": "1.2.276.0.76.4.999"})
	"User profession is not allowed" in authz.reasons with input as with_user({"professionOID": "1.2.276.0.76.4.999"})
}

test_an_unknown_scope_is_denied if {
	"One or more requested scopes are not allowed" in authz.reasons with input as with_scopes(["invalid_scope_xyz"])
}

test_no_scope_is_denied if {
	not authz.allow with input as with_scopes([])
}

test_a_requestor_may_not_ask_for_management_scopes if {
	not authz.allow with input as with_scopes(["system/*.cruds"])
	not authz.allow with input as with_scopes(["system/Schedule.c"])
}

test_an_owner_gets_management_scopes if {
	owner := object.union(with_scopes(["system/*.cruds", "system/Schedule.cruds", "system/Slot.u"]), {"user_info": {"repository_owner": true}})
	authz.allow with input as owner
}

test_a_narrower_permission_is_covered if {
	authz.allow with input as with_scopes(["system/Appointment.rs", "system/Subscription.c"])
}

test_a_tpm_posture_is_allowed if {
	authz.allow with input as object.union(practice, {"client_registration_data": {"posture_type": "tpm"}})
}

test_an_unknown_posture_is_denied if {
	"Client posture type is not allowed" in authz.reasons with input as object.union(practice, {"client_registration_data": {"posture_type": "android"}})
}

test_a_product_allow_list_is_opt_in if {
	authz.allow with input as object.union(practice, {"client_registration_data": {"product_id": "unknown_product", "product_version": "99.99.99"}})
}

test_a_product_allow_list_denies_other_products_and_versions if {
	products := [{"product_id": "terminus-client", "versions": ["0.1.0"]}]
	authz.allow with input as practice with data.products as products
	not authz.allow with input as object.union(practice, {"client_registration_data": {"product_version": "99.99.99"}}) with data.products as products
	"Client product or version is not allowed" in authz.reasons with input as object.union(practice, {"client_registration_data": {"product_id": "unknown_product"}}) with data.products as products
}

test_an_audience_allow_list_denies_other_audiences if {
	not authz.allow with input as object.union(practice, {"authorization_request": {"audience": ["https://evil.example.com/api"]}}) with data.audiences as ["http://localhost:8080/fhir"]
}

test_a_blocked_user_is_denied if {
	"User is on the blocklist" in authz.reasons with input as practice with data.blocked_users as ["1-2-PRAXIS"]
}

test_a_blocked_ip_is_denied if {
	not authz.allow with input as practice with data.blocked_ips as ["127.0.0.1"]
}

tpm_practice(pcr23) := object.union(practice, {"client_registration_data": {
	"posture_type": "tpm",
	"attestation_result": {"tpm": {"pcrs": {"7": concat("", array.concat(["a"], [x | some _ in numbers.range(1, 63); x := "0"])), "23": pcr23}, "quote_verified": true}},
}})

baseline := {"7": concat("", array.concat(["A"], [x | some _ in numbers.range(1, 63); x := "0"])), "23": concat("", [x | some _ in numbers.range(1, 64); x := "b"])}

test_tpm_postures_pass_without_baselines if {
	authz.allow with input as tpm_practice("cc")
}

test_tpm_pcrs_matching_a_baseline_pass if {
	authz.allow with input as tpm_practice(baseline["23"]) with data.tpm.pcr_baselines as [baseline]
}

test_tpm_pcrs_outside_the_baselines_are_denied if {
	not authz.allow with input as tpm_practice("cc") with data.tpm.pcr_baselines as [baseline]
	"pcr_mismatch" in authz.reasons with input as tpm_practice("cc") with data.tpm.pcr_baselines as [baseline]
}

# A patient (CONTRACT 10): no profession, the patient scopes of the data document.
patient := object.union(practice, {
	"user_info": {"identifier": "X485231029", "professionOID": "", "commonName": "X485231029", "repository_owner": false, "patient": true},
	"authorization_request": {"scopes": ["patient/Appointment.crus", "patient/Slot.rs"], "grant_type": "authorization_code"},
})

test_a_patient_with_patient_scopes_is_allowed if {
	authz.allow with input as patient
}

test_a_patient_may_not_ask_for_system_scopes if {
	not authz.allow with input as object.union(patient, {"authorization_request": {"scopes": ["system/Slot.rs"]}})
}

test_a_practice_may_not_ask_for_patient_scopes if {
	not authz.allow with input as with_scopes(["patient/Appointment.crus"])
}
