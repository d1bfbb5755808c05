# Terminus access policy for OPA: the same decision as the embedded engine
# (src/guard/policy/embedded.ts) over the same data document (policies/default.json).
#
# The guard POSTs {"input": ...} to $POLICY_ENGINE_URL/v1/data/authz and reads
# result.allow, result.ttl and result.reasons (gematik pdp-decision.yaml).
# Input: gematik policy-engine-input.yaml v1.1 plus user_info.repository_owner.
package authz

import rego.v1

default allow := false

allow if count(reasons) == 0

# Token lifetimes in seconds, only on allow (gematik A_28527); a workload gets no refresh token.
ttl := data.token_ttl if {
	allow
	not is_workload
}

ttl := {"access_token": data.token_ttl.access_token} if {
	allow
	is_workload
}

# A workload token exchange (CONTRACT 11) names input.workload instead of a client and a user:
# the client and user rules do not apply to it, its scopes come from scopes.workload.
is_workload if input.workload

# A patient (CONTRACT 10, authorization-code flow) has no profession; the patient scopes bound them.
is_patient if input.user_info.patient == true

reasons contains "User profession is not allowed" if {
	not is_workload
	not is_patient
	not input.user_info.professionOID in data.professions
}

reasons contains "Client product or version is not allowed" if {
	not is_workload
	not product_allowed
}

reasons contains "Client posture type is not allowed" if {
	not is_workload
	not input.client_registration_data.posture_type in data.posture_types
}

reasons contains "One or more requested scopes are not allowed" if {
	count(input.authorization_request.scopes) == 0
}

reasons contains "One or more requested scopes are not allowed" if {
	some s in input.authorization_request.scopes
	not scope_allowed(s)
}

# An empty audience list means: only this server's resource (the AS checks `resource` itself).
reasons contains "One or more requested audiences are not allowed" if {
	count(data.audiences) > 0
	some a in input.authorization_request.audience
	not a in data.audiences
}

reasons contains "User is on the blocklist" if {
	input.user_info.identifier in object.get(data, "blocked_users", [])
}

reasons contains "User is on the blocklist" if {
	input.workload.sub in object.get(data, "blocked_users", [])
}

reasons contains "Source IP address is blocked" if {
	input.authorization_request.ip_address in object.get(data, "blocked_ips", [])
}

# A TPM posture's replayed PCRs must match one of tpm.pcr_baselines (PCR index -> lowercase hex);
# no baselines admit any values (CONTRACT section 7).
reasons contains "pcr_mismatch" if {
	tpm := input.client_registration_data.attestation_result.tpm
	baselines := object.get(data, ["tpm", "pcr_baselines"], [])
	count(baselines) > 0
	not pcr_baseline_matched(tpm)
}

pcr_baseline_matched(tpm) if {
	some b in data.tpm.pcr_baselines
	every index, value in b {
		object.get(tpm, ["pcrs", index], "") == lower(value)
	}
}

# An empty product list admits any product (CONTRACT section 7: an allow-list is opt-in).
product_allowed if count(data.products) == 0

product_allowed if {
	some p in data.products
	p.product_id == input.client_registration_data.product_id
	version_allowed(p)
}

version_allowed(p) if count(object.get(p, "versions", [])) == 0

version_allowed(p) if input.client_registration_data.product_version in p.versions

# Requestors get scopes.requestor; REPOSITORY_OWNERS get scopes.owner in addition (CONTRACT 4).
allowed_scopes := data.scopes.requestor if {
	not is_workload
	not is_patient
	not input.user_info.repository_owner
}

allowed_scopes := array.concat(data.scopes.requestor, data.scopes.owner) if {
	not is_workload
	not is_patient
	input.user_info.repository_owner
}

allowed_scopes := object.get(data.scopes, "patient", []) if is_patient

allowed_scopes := object.get(data.scopes, "workload", data.scopes.requestor) if is_workload

scope_allowed(s) if s in allowed_scopes

# SMART v2: system/Appointment.rs is covered by system/*.cruds (or system/Appointment.crus):
# same context (system or patient), same or wildcard type, and every requested permission letter
# among the allowed ones.
scope_allowed(s) if {
	[rctx, rtype, rperms] := smart_scope(s)
	some a in allowed_scopes
	[actx, atype, aperms] := smart_scope(a)
	actx == rctx
	atype in {"*", rtype}
	every c in split(rperms, "") {
		contains(aperms, c)
	}
}

smart_scope(s) := [m[0][1], m[0][2], m[0][3]] if {
	m := regex.find_all_string_submatch_n(`^(system|patient)/(\*|[A-Z][A-Za-z]+)\.(c?r?u?d?s?)$`, s, 1)
	count(m) == 1
	m[0][3] != ""
}
