package proto2

// Readers of the nested shapes the bodies share (§3.19).

func readIdentity(n node) PublicIdentity {
	o := n.strict("identity", "encryption", "encryptionSig")
	return PublicIdentity{
		Identity:      o.key("identity").nonEmpty(),
		Encryption:    o.key("encryption").nonEmpty(),
		EncryptionSig: o.key("encryptionSig").nonEmpty(),
	}
}

func readDaemon(n node) DaemonInfo {
	o := n.strict("version", "label", "platform")
	return DaemonInfo{
		Version:  o.key("version").nonEmpty(),
		Label:    o.key("label").sized(1, MaxDaemonLabel),
		Platform: o.key("platform").oneOf(platforms...),
	}
}

func readCapability(n node) Capability {
	o := n.strict("kind", "service", "backendId", "backendClass", "model", "knownModels", "offerScope")
	var known []string
	if o.has("knownModels") {
		known = each(o.key("knownModels"), 0, node.nonEmpty)
	}
	return Capability{
		Kind:         o.key("kind").oneOf(kinds...),
		Service:      o.key("service").nonEmpty(),
		BackendID:    o.key("backendId").oneOf(backendIDs...),
		BackendClass: o.key("backendClass").oneOf(backendClasses...),
		Model:        o.key("model").nonEmpty(),
		KnownModels:  known,
		OfferScope:   o.key("offerScope").oneOf(audiences...),
	}
}

func readWithheld(n node) WithheldKind {
	o := n.strict("kind", "claimants")
	return WithheldKind{
		Kind: o.key("kind").oneOf(kinds...),
		Claimants: each(o.key("claimants"), 2, func(n node) Claimant {
			c := n.strict("service", "offer")
			return Claimant{Service: c.key("service").nonEmpty(), Offer: c.key("offer").oneOf(audiences...)}
		}),
	}
}

func readGrantRef(n node) GrantRef {
	o := n.strict("jobId", "leaseId")
	return GrantRef{JobID: o.key("jobId").nonEmpty(), LeaseID: o.key("leaseId").nonEmpty()}
}

func readStub(n node) JobStub {
	o := n.strict("id", "kind", "owner", "site", "audience", "purpose", "sizeClass", "streaming", "deadlineAt")
	var purpose string
	if o.has("purpose") {
		purpose = o.key("purpose").nonEmpty()
	}
	return JobStub{
		ID:         o.key("id").nonEmpty(),
		Kind:       o.key("kind").oneOf(kinds...),
		Owner:      o.key("owner").nonEmpty(),
		Site:       o.key("site").nonEmpty(),
		Audience:   o.key("audience").oneOf(audiences...),
		Purpose:    purpose,
		SizeClass:  o.key("sizeClass").oneOf(sizeClasses...),
		Streaming:  o.key("streaming").boolean(),
		DeadlineAt: o.key("deadlineAt").positive(),
	}
}

func readEnvelope(n node) SealedEnvelope {
	o := n.strict("ciphertext", "recipientKeyId", "senderKeyId", "direction", "deadlineAt")
	return SealedEnvelope{
		Ciphertext:     o.key("ciphertext").nonEmpty(),
		RecipientKeyID: o.key("recipientKeyId").nonEmpty(),
		SenderKeyID:    o.key("senderKeyId").nonEmpty(),
		Direction:      o.key("direction").oneOf(directions...),
		DeadlineAt:     o.key("deadlineAt").positive(),
	}
}

func readLease(n node) Lease {
	o := n.strict("id", "runnerId", "expiresAt")
	return Lease{
		ID:        o.key("id").nonEmpty(),
		RunnerID:  o.key("runnerId").nonEmpty(),
		ExpiresAt: o.key("expiresAt").positive(),
	}
}

func readGrant(n node) SignedGrant {
	o := n.strict("grantId", "jobId", "site", "user", "owner", "purpose", "kind", "service", "issuedAt", "signature")
	return SignedGrant{
		GrantID:   o.key("grantId").nonEmpty(),
		JobID:     o.key("jobId").nonEmpty(),
		Site:      o.key("site").nonEmpty(),
		User:      o.key("user").nonEmpty(),
		Owner:     o.key("owner").nonEmpty(),
		Purpose:   o.key("purpose").nonEmpty(),
		Kind:      o.key("kind").nonEmpty(),
		Service:   o.key("service").nonEmpty(),
		IssuedAt:  o.key("issuedAt").positive(),
		Signature: o.key("signature").nonEmpty(),
	}
}

func readSuccession(n node) Succession {
	o := n.strict("identity", "signature")
	return Succession{Identity: readIdentity(o.key("identity")), Signature: o.key("signature").nonEmpty()}
}
