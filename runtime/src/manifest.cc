#include "manifest.h"

namespace tl::rt {

namespace {

template <typename T>
size_t Len(const flatbuffers::Vector<T>* v) {
  return v ? v->size() : 0;
}

std::string Str(const flatbuffers::String* s) { return s ? s->str() : std::string(); }

}  // namespace

// Manifest -> the plain structures of selection.h and validate.h. The reader
// already checked indices; the rank/shape agreement is checked here because
// validation relies on it.
Status KernelFromManifest(const tl::bundle::Kernel& k, KernelInfo* out) {
  out->sig.name = Str(k.name());
  for (size_t s = 0; s < Len(k.symbols()); ++s) out->sig.symbols.push_back(k.symbols()->Get(s)->str());
  const auto nsym = static_cast<int>(out->sig.symbols.size());
  for (size_t i = 0; i < Len(k.params()); ++i) {
    const tl::bundle::Param* p = k.params()->Get(i);
    ParamSig ps;
    ps.name = Str(p->name());
    ps.kind = static_cast<int>(p->kind());
    if (p->dtype()) ps.dtype = tl_dtype_t{p->dtype()->code(), p->dtype()->bits(), p->dtype()->lanes()};
    ps.access = static_cast<int>(p->access());
    ps.rank = p->rank();
    ps.ptr_alignment = p->ptr_alignment();
    ps.binds_symbol = p->binds_symbol();
    if (ps.kind == TL_PARAM_BUFFER) {
      if (ps.rank < 0 || static_cast<size_t>(ps.rank) != Len(p->shape())) {
        return tl::MakeStatus(StatusCode::kInvalidArgument, "kernel '%s' parameter %zu '%s': rank %d but %zu dims",
                              out->sig.name.c_str(), i, ps.name.c_str(), ps.rank, Len(p->shape()));
      }
      for (size_t d = 0; d < Len(p->shape()); ++d) {
        const tl::bundle::Dim* dim = p->shape()->Get(d);
        DimSig ds{dim->static_size(), dim->symbol(), dim->divisible_by()};
        if (ds.symbol >= nsym) {
          return tl::MakeStatus(StatusCode::kInvalidArgument, "kernel '%s' parameter '%s' dim %zu: symbol %d of %d",
                                out->sig.name.c_str(), ps.name.c_str(), d, ds.symbol, nsym);
        }
        ps.shape.push_back(ds);
      }
    } else if (ps.kind == TL_PARAM_SCALAR) {
      ps.rank = 0;
      if (ps.binds_symbol >= nsym) {
        return tl::MakeStatus(StatusCode::kInvalidArgument, "kernel '%s' parameter '%s': binds symbol %d of %d",
                              out->sig.name.c_str(), ps.name.c_str(), ps.binds_symbol, nsym);
      }
    } else {
      return tl::MakeStatus(StatusCode::kIncompatible, "kernel '%s' parameter '%s': unknown kind %d",
                            out->sig.name.c_str(), ps.name.c_str(), ps.kind);
    }
    out->sig.params.push_back(std::move(ps));
  }
  for (size_t i = 0; i < Len(k.variants()); ++i) {
    const tl::bundle::Variant* v = k.variants()->Get(i);
    VariantDesc vd;
    vd.id = Str(v->id());
    vd.backend = static_cast<int>(v->backend());
    vd.code_kind = static_cast<int>(v->code_kind());
    vd.priority = v->priority();
    vd.has_guards = Len(v->guards()) > 0;
    if (const auto* r = v->requires_()) {
      vd.arch = Str(r->arch());
      vd.isa_version = r->isa_version();
      vd.min_driver = r->min_driver();
      for (size_t f = 0; f < Len(r->features()); ++f) vd.features.push_back(r->features()->Get(f)->str());
      vd.shared_bytes = r->shared_bytes();
      vd.threads_per_block = r->threads_per_block();
      vd.subgroup_size = r->subgroup_size();
      vd.push_constant_bytes = r->push_constant_bytes();
    }
    VariantLaunch vl;
    vl.payload = v->payload();
    for (size_t g = 0; g < Len(v->guards()); ++g) {
      const tl::bundle::Guard* gd = v->guards()->Get(g);
      vl.guards.push_back(GuardDesc{gd->param(), static_cast<int>(gd->op()), gd->value()});
    }
    if (const auto* l = v->launch()) {
      if (Len(l->block()) != 0 && Len(l->block()) != 3) {
        return tl::MakeStatus(StatusCode::kInvalidArgument, "kernel '%s' variant '%s': block has %zu values, expected 3",
                              out->sig.name.c_str(), vd.id.c_str(), Len(l->block()));
      }
      for (size_t a = 0; a < Len(l->block()); ++a) vl.block[a] = l->block()->Get(a);
      if (Len(l->grid()) != 0 && Len(l->grid()) != 3) {
        return tl::MakeStatus(StatusCode::kInvalidArgument, "kernel '%s' variant '%s': grid has %zu expressions, expected 3",
                              out->sig.name.c_str(), vd.id.c_str(), Len(l->grid()));
      }
      for (size_t a = 0; a < Len(l->grid()); ++a) {
        const auto* code = l->grid()->Get(a)->code();
        vl.grid.emplace_back(code ? std::vector<int64_t>(code->begin(), code->end()) : std::vector<int64_t>{});
      }
      vl.shared_bytes = static_cast<uint64_t>(l->static_shared_bytes()) + l->dynamic_shared_bytes();
      vl.cpu_scratch_bytes = l->cpu_scratch_bytes();
      vl.static_shared_bytes = l->static_shared_bytes();
      vl.dynamic_shared_bytes = l->dynamic_shared_bytes();
      vl.param_buffer_bytes = l->param_buffer_bytes();
      for (size_t b = 0; b < Len(l->vk_bindings()); ++b) {
        const tl::bundle::VkBinding* vb = l->vk_bindings()->Get(b);
        vl.vk_bindings.push_back(LoadRequest::VkBindingSlot{vb->param(), vb->set(), vb->binding(), vb->descriptor_type()});
      }
      for (size_t r = 0; r < Len(l->vk_push()); ++r) {
        const tl::bundle::VkPushRange* vr = l->vk_push()->Get(r);
        vl.vk_push.push_back(LoadRequest::VkPushSlot{vr->param(), vr->offset(), vr->size()});
      }
      vl.vk_push_bytes = l->vk_push_bytes();
      for (size_t s = 0; s < Len(l->param_slots()); ++s) {
        const tl::bundle::ParamSlot* ps = l->param_slots()->Get(s);
        vl.param_slots.push_back(
            LoadRequest::ParamSlot{ps->param(), ps->symbol(), ps->offset(), ps->size(), ps->align(), ps->tensor_map()});
      }
      for (size_t m = 0; m < Len(l->tensor_maps()); ++m) {
        const tl::bundle::TensorMap* tm = l->tensor_maps()->Get(m);
        LoadRequest::TensorMapSpec spec;
        spec.param = tm->param();
        for (size_t d = 0; d < Len(tm->box()); ++d) spec.box.push_back(tm->box()->Get(d));
        spec.swizzle = tm->swizzle();
        spec.l2_promotion = tm->l2_promotion();
        vl.tensor_maps.push_back(std::move(spec));
      }
    }
    out->variants.push_back(std::move(vd));
    out->launches.push_back(std::move(vl));
    out->entry_points.push_back(Str(v->entry_point()));
  }
  for (size_t a = 0; a < Len(k.attrs()); ++a) {
    const tl::bundle::KeyValue* kv = k.attrs()->Get(a);
    out->attrs.emplace_back(Str(kv->key()), Str(kv->value()));
  }
  return Status::Ok();
}


}  // namespace tl::rt
