package mapping

import "encoding/json"

// PayloadTenant finds the tenant a payload names where substate's own
// messages and the usual provider payloads carry it (tenantId, data.tenantId,
// Restate's target_service_key, the tenantId of an EventBridge execution
// input), without the tenant rules: what a dead letter shows as its
// tenant, and what a key's tenant prefix is checked against before a
// requeue. "" when it names none.
func PayloadTenant(body []byte) string {
	var v struct {
		TenantID string `json:"tenantId"`
		Data     struct {
			TenantID string `json:"tenantId"`
		} `json:"data"`
		Detail struct {
			Input string `json:"input"`
		} `json:"detail"`
		TargetServiceKey string `json:"target_service_key"`
	}
	if json.Unmarshal(body, &v) != nil {
		return ""
	}
	switch {
	case v.TenantID != "":
		return v.TenantID
	case v.Data.TenantID != "":
		return v.Data.TenantID
	case v.TargetServiceKey != "":
		return v.TargetServiceKey
	}
	var in struct {
		TenantID string `json:"tenantId"`
	}
	if json.Unmarshal([]byte(v.Detail.Input), &in) == nil {
		return in.TenantID
	}
	return ""
}
